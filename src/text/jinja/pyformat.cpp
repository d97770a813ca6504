#include "text/jinja/pyformat.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "text/jinja/error.h"
#include "text/jinja/ops.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

std::string ascii_repr(const Value& v) {
  std::string r = repr(v);
  std::string out;
  size_t pos = 0;
  while (pos < r.size()) {
    char32_t cp = unicode::decode(r, &pos);
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      unicode::append_escaped(out, cp);
    }
  }
  return out;
}

std::string truncate_codepoints(const std::string& s, int64_t n) {
  if (n < 0) return s;
  size_t pos = 0;
  int64_t count = 0;
  while (pos < s.size() && count < n) {
    unicode::decode(s, &pos);
    ++count;
  }
  return s.substr(0, pos);
}

std::string to_base(uint64_t v, int base, bool upper) {
  if (v == 0) return "0";
  const char* digits = upper ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  while (v > 0) {
    out.insert(out.begin(), digits[v % static_cast<uint64_t>(base)]);
    v /= static_cast<uint64_t>(base);
  }
  return out;
}

uint64_t magnitude(int64_t v) {
  return v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
}

// Formats |f| with a C conversion (e, f, g) and the given precision.
std::string format_float_abs(double f, char type, int precision, bool alt) {
  f = std::fabs(f);
  if (std::isinf(f)) return (type >= 'A' && type <= 'Z') ? "INF" : "inf";
  if (std::isnan(f)) return (type >= 'A' && type <= 'Z') ? "NAN" : "nan";
  char fmt[16];
  std::snprintf(fmt, sizeof fmt, "%%%s.%d%c", alt ? "#" : "", precision, type);
  int n = std::snprintf(nullptr, 0, fmt, f);
  std::string out(static_cast<size_t>(n), '\0');
  std::snprintf(out.data(), out.size() + 1, fmt, f);
  return out;
}

void pad(std::string* body, const std::string& sign_prefix, int64_t width, bool left, bool zero,
         char fill = ' ', char align = 0) {
  int64_t len = static_cast<int64_t>(unicode::length(sign_prefix) + unicode::length(*body));
  if (width <= len) {
    *body = sign_prefix + *body;
    return;
  }
  size_t padding = static_cast<size_t>(width - len);
  if (zero) {
    *body = sign_prefix + std::string(padding, '0') + *body;
    return;
  }
  std::string fill_s(1, fill);
  std::string pads;
  for (size_t i = 0; i < padding; ++i) pads += fill_s;
  if (align == 0) align = left ? '<' : '>';
  if (align == '<') {
    *body = sign_prefix + *body + pads;
  } else if (align == '>') {
    *body = pads + sign_prefix + *body;
  } else if (align == '^') {
    size_t l = padding / 2;
    std::string lp, rp;
    for (size_t i = 0; i < l; ++i) lp += fill_s;
    for (size_t i = l; i < padding; ++i) rp += fill_s;
    *body = lp + sign_prefix + *body + rp;
  } else {  // '=': padding after the sign
    *body = sign_prefix + pads + *body;
  }
}

}  // namespace

std::string percent_format(std::string_view fmt, const Value& args) {
  std::vector<Value> positional;
  bool single = false;
  if (args.is_tuple()) {
    positional = args.items();
  } else {
    positional.push_back(args);
    single = true;
  }
  const DictData* mapping = (args.is_dict() && !args.is_tuple()) ? &args.as_dict() : nullptr;
  // CPython treats any subscriptable non-tuple, non-str argument (dict, list) as a "mapping": unused,
  // it does not trigger "not all arguments converted".
  const bool mapping_like = mapping != nullptr || (args.is_list() && !args.is_tuple()) || args.is_undefined();
  // CPython: a single non-tuple argument is consumed once, by a positional spec or a %(key) lookup.
  size_t next_arg = 0;
  bool used_mapping = false;
  auto take = [&]() -> Value {
    if (next_arg >= positional.size()) throw_type_error("not enough arguments for format string");
    return positional[next_arg++];
  };
  std::string out;
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i];
    if (c != '%') {
      out.push_back(c);
      ++i;
      continue;
    }
    ++i;
    if (i >= fmt.size()) throw_type_error("incomplete format");
    Value arg;
    bool have_arg = false;
    if (fmt[i] == '(') {
      if (mapping == nullptr) {
        if (mapping_like) throw_type_error(args.type_name() + " indices must be integers or slices, not str");
        throw_type_error("format requires a mapping");
      }
      size_t depth = 1, j = i + 1;
      while (j < fmt.size() && depth > 0) {
        if (fmt[j] == '(') ++depth;
        if (fmt[j] == ')') --depth;
        ++j;
      }
      if (depth != 0) throw_type_error("incomplete format key");
      std::string key(fmt.substr(i + 1, j - i - 2));
      const Value* v = mapping->find(Value::string(key));
      if (v == nullptr) throw_type_error("KeyError: " + str_repr(key));
      arg = *v;
      have_arg = true;
      used_mapping = true;
      if (single) next_arg = positional.size();
      i = j;
    }
    bool left = false, plus = false, space = false, alt = false, zero = false;
    for (; i < fmt.size(); ++i) {
      char f = fmt[i];
      if (f == '-')
        left = true;
      else if (f == '+')
        plus = true;
      else if (f == ' ')
        space = true;
      else if (f == '#')
        alt = true;
      else if (f == '0')
        zero = true;
      else
        break;
    }
    int64_t width = -1, precision = -1;
    if (i < fmt.size() && fmt[i] == '*') {
      Value w = take();
      if (!w.is_integral()) throw_type_error("* wants int");
      width = w.as_int();
      if (width < 0) {
        left = true;
        width = -width;
      }
      ++i;
    } else {
      while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
        width = (width < 0 ? 0 : width) * 10 + (fmt[i++] - '0');
    }
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      precision = 0;
      if (i < fmt.size() && fmt[i] == '*') {
        Value p = take();
        if (!p.is_integral()) throw_type_error("* wants int");
        precision = p.as_int();
        ++i;
      } else {
        while (i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
          precision = precision * 10 + (fmt[i++] - '0');
      }
    }
    while (i < fmt.size() && (fmt[i] == 'h' || fmt[i] == 'l' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) throw_type_error("incomplete format");
    char type = fmt[i++];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!have_arg) arg = take();
    std::string body, sign;
    bool numeric = true;
    switch (type) {
      case 's':
      case 'r':
      case 'a': {
        numeric = false;
        body = type == 's' ? to_str(arg) : (type == 'r' ? repr(arg) : ascii_repr(arg));
        body = truncate_codepoints(body, precision);
        break;
      }
      case 'd':
      case 'i':
      case 'u': {
        if (arg.is_undefined()) arg.fail_undefined();
        if (!arg.is_number()) {
          throw_type_error(std::string("%") + type + " format: a real number is required, not " +
                           arg.type_name());
        }
        int64_t v;
        if (arg.is_float()) {
          double f = arg.as_double();
          if (!std::isfinite(f)) throw_type_error("cannot convert float infinity or NaN to integer");
          v = static_cast<int64_t>(std::trunc(f));
        } else {
          v = arg.as_int();
        }
        body = std::to_string(magnitude(v));
        if (precision > static_cast<int64_t>(body.size()))
          body.insert(0, static_cast<size_t>(precision) - body.size(), '0');
        sign = v < 0 ? "-" : (plus ? "+" : (space ? " " : ""));
        break;
      }
      case 'x':
      case 'X':
      case 'o': {
        if (arg.is_undefined()) arg.fail_undefined();
        if (!arg.is_integral()) {
          throw_type_error(std::string("%") + type + " format: an integer is required, not " +
                           arg.type_name());
        }
        int64_t v = arg.as_int();
        body = to_base(magnitude(v), type == 'o' ? 8 : 16, type == 'X');
        if (precision > static_cast<int64_t>(body.size()))
          body.insert(0, static_cast<size_t>(precision) - body.size(), '0');
        sign = v < 0 ? "-" : (plus ? "+" : (space ? " " : ""));
        if (alt) sign += type == 'o' ? "0o" : (type == 'x' ? "0x" : "0X");
        break;
      }
      case 'e':
      case 'E':
      case 'f':
      case 'F':
      case 'g':
      case 'G': {
        if (arg.is_undefined()) arg.fail_undefined();
        if (!arg.is_number()) throw_type_error("must be real number, not " + arg.type_name());
        double f = arg.as_double();
        body = format_float_abs(f, type, precision < 0 ? 6 : static_cast<int>(precision), alt);
        sign = std::signbit(f) && !std::isnan(f) ? "-" : (plus ? "+" : (space ? " " : ""));
        break;
      }
      case 'c': {
        numeric = false;
        if (arg.is_integral()) {
          unicode::append(body, static_cast<char32_t>(arg.as_int()));
        } else if (arg.is_string() && unicode::length(arg.as_string()) == 1) {
          body = arg.as_string();
        } else {
          throw_type_error("%c requires int or char");
        }
        break;
      }
      default: throw_type_error(std::string("unsupported format character '") + type + "'");
    }
    pad(&body, sign, width, left, zero && !left && numeric);
    out += body;
  }
  if (next_arg < positional.size() && !(single && (mapping_like || used_mapping))) {
    throw_type_error("not all arguments converted during string formatting");
  }
  return out;
}

std::string format_spec(const Value& v, std::string_view spec) {
  if (spec.empty()) return to_str(v);
  // [[fill]align][sign][#][0][width][,|_][.precision][type]
  size_t i = 0;
  char fill = ' ', align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  size_t first_len = 1;
  if (!spec.empty() && static_cast<unsigned char>(spec[0]) >= 0x80) {
    size_t p = 0;
    unicode::decode(spec, &p);
    first_len = p;
  }
  std::string fill_s(1, ' ');
  if (spec.size() > first_len && is_align(spec[first_len])) {
    fill_s = std::string(spec.substr(0, first_len));
    fill = fill_s.size() == 1 ? fill_s[0] : ' ';
    align = spec[first_len];
    i = first_len + 1;
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  char sign_flag = 0;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign_flag = spec[i++];
  bool alt = false, zero = false;
  if (i < spec.size() && spec[i] == '#') {
    alt = true;
    ++i;
  }
  if (i < spec.size() && spec[i] == '0') {
    zero = true;
    ++i;
  }
  int64_t width = -1;
  while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9')
    width = (width < 0 ? 0 : width) * 10 + (spec[i++] - '0');
  char grouping = 0;
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) grouping = spec[i++];
  int64_t precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    precision = 0;
    while (i < spec.size() && spec[i] >= '0' && spec[i] <= '9')
      precision = precision * 10 + (spec[i++] - '0');
  }
  char type = 0;
  if (i < spec.size()) type = spec[i++];
  if (i != spec.size()) throw_type_error("Invalid format specifier");
  if (fill_s.size() > 1) throw_type_error("multi-byte fill characters are not supported in format specs");

  std::string body, sign;
  bool numeric = false;
  if (v.is_string() || v.is_undefined() || v.is_none() || v.is_list() || v.is_dict()) {
    if (!(v.is_string()) && !spec.empty() &&
        !(type == 0 && !sign_flag && !zero && precision < 0 && width < 0)) {
      if (!v.is_string())
        throw_type_error("unsupported format string passed to " + v.type_name() + ".__format__");
    }
    if (type != 0 && type != 's')
      throw_type_error(std::string("Unknown format code '") + type + "' for object of type 'str'");
    if (sign_flag) throw_type_error("Sign not allowed in string format specifier");
    body = truncate_codepoints(to_str(v), precision);
  } else if (v.is_number()) {
    numeric = true;
    bool as_int = v.is_integral() && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' ||
                                      type == 'b' || type == 'c' || type == 'n');
    if (v.is_bool() && type == 0) {
      body = to_str(v);  // format(True, '>5') formats str(True)
      numeric = false;
    } else if (as_int) {
      int64_t n = v.as_int();
      if (precision >= 0) throw_type_error("Precision not allowed in integer format specifier");
      int base = type == 'x' || type == 'X' ? 16 : (type == 'o' ? 8 : (type == 'b' ? 2 : 10));
      body = to_base(magnitude(n), base, type == 'X');
      if (grouping && base == 10) {
        std::string g;
        for (size_t k = 0; k < body.size(); ++k) {
          if (k > 0 && (body.size() - k) % 3 == 0) g.push_back(grouping);
          g.push_back(body[k]);
        }
        body = g;
      }
      sign = n < 0 ? "-" : (sign_flag == '+' ? "+" : (sign_flag == ' ' ? " " : ""));
      if (alt && base != 10) sign += base == 16 ? (type == 'X' ? "0X" : "0x") : (base == 8 ? "0o" : "0b");
    } else {
      double f = v.as_double();
      char t = type == 0 ? 'g' : type;
      if (t != 'e' && t != 'E' && t != 'f' && t != 'F' && t != 'g' && t != 'G' && t != '%') {
        throw_type_error(std::string("Unknown format code '") + type + "' for object of type 'float'");
      }
      if (type == 0 && precision < 0) {
        body = float_repr(std::fabs(f));
      } else if (t == '%') {
        body = format_float_abs(f * 100.0, 'f', precision < 0 ? 6 : static_cast<int>(precision), alt) + "%";
      } else {
        body = format_float_abs(f, t, precision < 0 ? 6 : static_cast<int>(precision), alt);
      }
      if (grouping && std::isfinite(f)) {
        size_t int_end = body.find_first_not_of("0123456789");
        if (int_end == std::string::npos) int_end = body.size();
        std::string g;
        for (size_t k = 0; k < int_end; ++k) {
          if (k > 0 && (int_end - k) % 3 == 0) g.push_back(grouping);
          g.push_back(body[k]);
        }
        body = g + body.substr(int_end);
      }
      sign =
          std::signbit(f) && !std::isnan(f) ? "-" : (sign_flag == '+' ? "+" : (sign_flag == ' ' ? " " : ""));
    }
  } else {
    throw_type_error("unsupported format string passed to " + v.type_name() + ".__format__");
  }
  if (zero && align == 0 && numeric) {
    pad(&body, sign, width, false, true);
  } else {
    if (align == 0) align = numeric ? '>' : '<';
    pad(&body, sign, width, false, false, fill, align);
  }
  return body;
}

std::string brace_format(std::string_view fmt, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  int numbering = 0;  // 0 unknown, 1 automatic, 2 manual (Python refuses to mix them)
  size_t i = 0;
  while (i < fmt.size()) {
    char c = fmt[i];
    if (c == '}') {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') {
        out.push_back('}');
        i += 2;
        continue;
      }
      throw_type_error("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      i += 2;
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string_view::npos) throw_type_error("expected '}' before end of string");
    std::string_view field = fmt.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string_view::npos) throw_type_error("nested format fields are not supported");
    i = close + 1;
    std::string_view spec, conversion;
    size_t colon = field.find(':');
    if (colon != std::string_view::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string_view::npos) {
      conversion = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    size_t name_end = 0;
    while (name_end < field.size() && field[name_end] != '.' && field[name_end] != '[') ++name_end;
    std::string_view name = field.substr(0, name_end);
    Value obj;
    if (name.empty() ||
        std::all_of(name.begin(), name.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
      int mode = name.empty() ? 1 : 2;
      if (numbering != 0 && numbering != mode) {
        throw_type_error(mode == 1
                             ? "cannot switch from manual field specification to automatic field numbering"
                             : "cannot switch from automatic field numbering to manual field specification");
      }
      numbering = mode;
      size_t index = name.empty() ? auto_index++ : static_cast<size_t>(std::stoul(std::string(name)));
      if (index >= args.args.size())
        throw_type_error("Replacement index " + std::to_string(index) +
                         " out of range for positional args tuple");
      obj = args.args[index];
    } else {
      bool found = false;
      for (const auto& [k, v] : args.kwargs) {
        if (k == name) {
          obj = v;
          found = true;
        }
      }
      if (!found) throw_type_error("KeyError: " + str_repr(name));
    }
    size_t p = name_end;
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t e = p + 1;
        while (e < field.size() && field[e] != '.' && field[e] != '[') ++e;
        obj = get_attribute(obj, field.substr(p + 1, e - p - 1));
        p = e;
      } else {
        size_t e = field.find(']', p);
        if (e == std::string_view::npos) throw_type_error("Missing ']' in format string");
        std::string key(field.substr(p + 1, e - p - 1));
        bool digits = !key.empty() &&
                      std::all_of(key.begin(), key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
        obj = get_item(obj, digits ? Value::integer(std::stoll(key)) : Value::string(key));
        p = e + 1;
      }
    }
    if (conversion == "r") {
      obj = Value::string(repr(obj));
    } else if (conversion == "s") {
      obj = Value::string(to_str(obj));
    } else if (conversion == "a") {
      obj = Value::string(ascii_repr(obj));
    } else if (!conversion.empty()) {
      throw_type_error("Unknown conversion specifier " + std::string(conversion));
    }
    out += format_spec(obj, spec);
  }
  return out;
}

}  // namespace loom::text::jinja
