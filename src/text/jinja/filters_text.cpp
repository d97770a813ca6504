// jinja2 filters on strings and numbers (jinja2/filters.py), with transformers' tojson override.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/json_dump.h"
#include "text/jinja/ops.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

// soft_str: str(value) (Markup stays Markup in jinja2; Loom returns plain strings, see README.md).
std::string soft_str(const Value& v) {
  return to_str(v);
}

Value str_method(Interpreter& interp, const std::string& s, const char* name, CallArgs args) {
  Value method;
  find_method(Value::string(s), name, &method);
  return interp.call(method, args);
}

// ---- string filters ----

Value f_upper(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("upper", args, {});
  return Value::string(unicode::upper(soft_str(v)));
}

Value f_lower(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("lower", args, {});
  return Value::string(unicode::lower(soft_str(v)));
}

Value f_capitalize(Interpreter& interp, const Value& v, CallArgs& args) {
  ArgBinder a("capitalize", args, {});
  return str_method(interp, soft_str(v), "capitalize", {});
}

Value f_title(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("title", args, {});
  // jinja2: re.split(r"([-\s({\[<]+)") then item[0].upper() + item[1:].lower() for each piece.
  std::u32string u = unicode::to_u32(soft_str(v));
  auto is_sep = [](char32_t c) {
    return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || unicode::is_space(c);
  };
  std::string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    unicode::append_upper(out, u[i]);
    out += unicode::lower(unicode::to_utf8(std::u32string_view(u).substr(i + 1, j - i - 1)));
    i = j;
  }
  return Value::string(std::move(out));
}

Value f_trim(Interpreter& interp, const Value& v, CallArgs& args) {
  ArgBinder a("trim", args, {"chars"});
  CallArgs inner;
  if (a.has(0)) inner.args.push_back(a.get(0));
  return str_method(interp, soft_str(v), "strip", inner);
}

Value f_center(Interpreter& interp, const Value& v, CallArgs& args) {
  ArgBinder a("center", args, {"width"});
  CallArgs inner;
  inner.args.push_back(a.get_or(0, Value::integer(80)));
  return str_method(interp, soft_str(v), "center", inner);
}

Value f_replace(Interpreter& interp, const Value& v, CallArgs& args) {
  ArgBinder a("replace", args, {"old", "new", "count"});
  CallArgs inner;
  inner.args = {Value::string(to_str(a.required(0))), Value::string(to_str(a.required(1)))};
  if (a.has(2) && !a.get(2).is_none()) inner.args.push_back(a.get(2));
  return str_method(interp, to_str(v), "replace", inner);
}

Value f_indent(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("indent", args, {"width", "first", "blank"});
  Value width = a.get_or(0, Value::integer(4));
  bool first = a.has(1) && truthy(a.get(1));
  bool blank = a.has(2) && truthy(a.get(2));
  std::string indention =
      width.is_string()
          ? width.as_string()
          : std::string(static_cast<size_t>(std::max<int64_t>(0, to_index(width, "indent width"))), ' ');
  // jinja2 does `s += "\n"` on the value itself: only strings (and Markup) are accepted.
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_string())
    throw_type_error("unsupported operand type(s) for +=: '" + v.type_name() + "' and 'str'");
  std::string s = v.as_string() + "\n";  // jinja2 quirk for splitlines
  // str.splitlines() semantics.
  std::vector<std::string> lines;
  {
    std::u32string u = unicode::to_u32(s);
    size_t i = 0;
    auto brk = [](char32_t c) {
      return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
             c == 0x85 || c == 0x2028 || c == 0x2029;
    };
    while (i < u.size()) {
      size_t j = i;
      while (j < u.size() && !brk(u[j])) ++j;
      lines.push_back(unicode::to_utf8(std::u32string_view(u).substr(i, j - i)));
      if (j < u.size()) j += (u[j] == '\r' && j + 1 < u.size() && u[j + 1] == '\n') ? 2 : 1;
      i = j;
    }
  }
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + indention;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? std::string() : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += indention;
      rv += lines[i];
    }
  }
  if (first) rv = indention + rv;
  return Value::string(std::move(rv));
}

Value f_truncate(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("truncate", args, {"length", "killwords", "end", "leeway"});
  int64_t length = a.has(0) ? to_index(a.get(0), "truncate length") : 255;
  bool killwords = a.has(1) && truthy(a.get(1));
  std::u32string end = unicode::to_u32(a.has(2) ? str_arg(a.get(2), "end") : std::string("..."));
  int64_t leeway = (a.has(3) && !a.get(3).is_none()) ? to_index(a.get(3), "leeway") : 5;
  if (length < static_cast<int64_t>(end.size()))
    throw_type_error("expected length >= " + std::to_string(end.size()));
  if (leeway < 0) throw_type_error("expected leeway >= 0");
  if (v.is_undefined()) return v;  // len(Undefined) == 0
  if (!v.is_string()) throw_type_error("object of type '" + v.type_name() + "' has no len()");
  std::u32string s = unicode::to_u32(to_str(v));
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value::string(to_str(v));
  std::u32string head = s.substr(0, static_cast<size_t>(length - static_cast<int64_t>(end.size())));
  if (!killwords) {
    size_t sp = head.rfind(U' ');
    if (sp != std::u32string::npos) head = head.substr(0, sp);
  }
  return Value::string(unicode::to_utf8(head + end));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("wordcount", args, {});
  std::string s = soft_str(v);
  int64_t n = 0;
  bool in_word = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    bool w = c == '_' || unicode::is_alnum(c);
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

Value f_format(Interpreter&, const Value& v, CallArgs& args) {
  if (!args.args.empty() && !args.kwargs.empty()) {
    throw_type_error("can't handle positional and keyword arguments at the same time");
  }
  Value operand;
  if (!args.kwargs.empty()) {
    auto d = std::make_shared<DictData>();
    for (const auto& [k, val] : args.kwargs) d->insert_or_assign(Value::string(k), val);
    operand = Value::dict(std::move(d));
  } else {
    operand = Value::tuple(args.args);
  }
  return Value::string(percent_format(soft_str(v), operand));
}

Value f_string(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("string", args, {});
  if (v.is_markup()) return v;
  return Value::string(to_str(v));
}

Value f_safe(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("safe", args, {});
  return v.is_markup() ? v : Value::markup(to_str(v));
}

Value f_escape(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("escape", args, {});
  return escape_markup(v);
}

Value f_forceescape(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("forceescape", args, {});
  return escape_markup(Value::string(to_str(v)));
}

// ---- serialisation ----

Value f_tojson(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a.has(0) && truthy(a.get(0));
  if (a.has(2) && !a.get(2).is_none()) {  // JSONEncoder.__init__ unpacks separators eagerly
    std::vector<Value> seps = unpack(a.get(2), 2);
    o.item_separator = str_arg(seps[0], "separator");
    o.key_separator = str_arg(seps[1], "separator");
  }
  // JSONEncoder.encode returns early for a str, so indent is only converted (' ' * indent) for other values.
  if (a.has(1) && !a.get(1).is_none() && !v.is_string()) {
    const Value& ind = a.get(1);
    if (ind.is_string()) {
      o.indent = ind.as_string();
    } else {
      if (!ind.is_integral())
        throw_type_error("can't multiply sequence by non-int of type '" + ind.type_name() + "'");
      o.indent = std::string(static_cast<size_t>(std::max<int64_t>(0, ind.as_int())), ' ');
    }
  }
  o.sort_keys = a.has(3) && truthy(a.get(3));
  return Value::string(json_dumps(v, o));
}

// ---- numbers ----

// Python float(str): surrounding whitespace, underscores between digits, inf/nan spellings.
bool parse_python_float(const std::string& raw, double* out) {
  std::string s = raw;
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  if (s.empty()) return false;
  std::string cleaned;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '_') {
      if (i == 0 || i + 1 >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i - 1])) ||
          !std::isdigit(static_cast<unsigned char>(s[i + 1]))) {
        return false;
      }
      continue;
    }
    cleaned.push_back(s[i]);
  }
  std::string lowered = unicode::lower(cleaned);
  std::string body = lowered;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) body = body.substr(1);
  if (body == "inf" || body == "infinity" || body == "nan") {
    double v = body == "nan" ? NAN : INFINITY;
    *out = lowered[0] == '-' ? -v : v;
    return true;
  }
  for (char c : body) {
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == '+' || c == '-'))
      return false;
  }
  char* end = nullptr;
  *out = std::strtod(cleaned.c_str(), &end);
  return end != nullptr && *end == '\0';
}

// Python int(str, base).
bool parse_python_int(const std::string& raw, int64_t base, int64_t* out) {
  if (base != 0 && (base < 2 || base > 36)) return false;  // ValueError in Python
  std::string s = raw;
  auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  bool neg = false;
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  if (i + 1 < s.size() && s[i] == '0') {
    char p = static_cast<char>(s[i + 1] | 0x20);
    int64_t prefixed = p == 'x' ? 16 : (p == 'o' ? 8 : (p == 'b' ? 2 : 0));
    if (prefixed != 0 && (base == 0 || base == prefixed)) {
      base = prefixed;
      i += 2;
      if (i < s.size() && s[i] == '_') ++i;
    }
  }
  if (base == 0) base = 10;
  if (i >= s.size()) return false;
  unsigned __int128 v = 0;
  bool prev_digit = false;
  for (; i < s.size(); ++i) {
    char c = s[i];
    if (c == '_') {
      if (!prev_digit || i + 1 >= s.size()) return false;
      prev_digit = false;
      continue;
    }
    int d = std::isdigit(static_cast<unsigned char>(c))   ? c - '0'
            : std::isalpha(static_cast<unsigned char>(c)) ? (c | 0x20) - 'a' + 10
                                                          : 99;
    if (d >= base) return false;
    v = v * static_cast<unsigned>(base) + static_cast<unsigned>(d);
    if (v > static_cast<unsigned __int128>(INT64_MAX) + 1)
      throw_type_error("integer overflow: Loom's templates use 64-bit integers");
    prev_digit = true;
  }
  if (!neg && v > static_cast<unsigned __int128>(INT64_MAX))
    throw_type_error("integer overflow: Loom's templates use 64-bit integers");
  *out = neg ? static_cast<int64_t>(0 - static_cast<uint64_t>(v)) : static_cast<int64_t>(v);
  return true;
}

bool float_to_int(double f, int64_t* out) {
  if (std::isnan(f)) return false;
  if (std::isinf(f)) throw_type_error("cannot convert float infinity to integer");
  double t = std::trunc(f);
  if (t >= 9.223372036854775807e18 || t < -9.223372036854775808e18) {
    throw_type_error("integer overflow: Loom's templates use 64-bit integers");
  }
  *out = static_cast<int64_t>(t);
  return true;
}

Value f_int(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("int", args, {"default", "base"});
  Value fallback = a.get_or(0, Value::integer(0));
  int64_t base = a.has(1) ? to_index(a.get(1), "base") : 10;
  int64_t out;
  if (v.is_string()) {
    if (parse_python_int(v.as_string(), base, &out)) return Value::integer(out);
    double f;
    if (parse_python_float(v.as_string(), &f)) {
      if (std::isinf(f)) return fallback;  // OverflowError is caught by the fallback path
      if (float_to_int(f, &out)) return Value::integer(out);
    }
    return fallback;
  }
  if (v.is_integral()) return Value::integer(v.as_int());
  if (v.is_float()) {
    if (float_to_int(v.as_double(), &out)) return Value::integer(out);
    return fallback;
  }
  if (v.is_undefined()) v.fail_undefined();  // int(Undefined) raises UndefinedError
  return fallback;
}

Value f_float(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("float", args, {"default"});
  Value fallback = a.get_or(0, Value::number(0.0));
  if (v.is_number()) return Value::number(v.as_double());
  if (v.is_string()) {
    double f;
    if (parse_python_float(v.as_string(), &f)) return Value::number(f);
    return fallback;
  }
  if (v.is_undefined()) v.fail_undefined();
  return fallback;
}

Value f_abs(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("abs", args, {});
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_float()) return Value::number(std::fabs(v.as_double()));
  if (v.is_integral()) {
    if (v.as_int() == INT64_MIN) throw_type_error("integer overflow: Loom's templates use 64-bit integers");
    return Value::integer(v.as_int() < 0 ? -v.as_int() : v.as_int());
  }
  throw_type_error("bad operand type for abs(): '" + v.type_name() + "'");
}

Value f_round(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("round", args, {"precision", "method"});
  std::string method = a.has(1) ? str_arg(a.get(1), "method") : "common";
  if (method != "common" && method != "ceil" && method != "floor") {
    throw_type_error("method must be common, ceil or floor");
  }
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_number()) throw_type_error("type " + v.type_name() + " doesn't define __round__ method");
  if (a.has(0) && a.get(0).is_none() && method == "common") {
    // round(x, None) == round(x): an int, halves to even.
    if (v.is_integral()) return Value::integer(v.as_int());
    double f = v.as_double();
    if (!std::isfinite(f)) throw_type_error("cannot convert float infinity or NaN to integer");
    return Value::integer(static_cast<int64_t>(std::nearbyint(f)));
  }
  int64_t precision = a.has(0) ? to_index(a.get(0), "precision") : 0;
  if (method == "common") {
    if (v.is_integral()) {
      if (precision >= 0) return Value::integer(v.as_int());
      // round(int, -n): round half to even at 10^n.
      int64_t p = 1;
      for (int64_t i = 0; i < -precision && p < INT64_MAX / 10; ++i) p *= 10;
      int64_t x = v.as_int();
      int64_t q = x / p, r = x % p;
      if (r < 0) {
        r += p;
        --q;
      }
      if (2 * r > p || (2 * r == p && (q % 2 != 0))) ++q;
      return Value::integer(q * p);
    }
    double f = v.as_double();
    if (!std::isfinite(f)) return Value::number(f);
    // Correctly rounded decimal formatting (glibc printf is exact, ties to even), as CPython's round().
    if (precision >= 0 && precision < 300) {
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), f);
      return Value::number(std::strtod(buf, nullptr));
    }
    double scale = std::pow(10.0, static_cast<double>(-precision));
    return Value::number(std::nearbyint(f / scale) * scale);
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  double r = method == "ceil" ? std::ceil(x) : std::floor(x);
  return Value::number(r / scale);
}

struct FilterEntry {
  std::string_view name;
  FilterFn fn;
};

constexpr FilterEntry kTextFilters[] = {
    {"abs", f_abs},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"e", f_escape},
    {"escape", f_escape},
    {"float", f_float},
    {"forceescape", f_forceescape},
    {"format", f_format},
    {"indent", f_indent},
    {"int", f_int},
    {"lower", f_lower},
    {"replace", f_replace},
    {"round", f_round},
    {"safe", f_safe},
    {"string", f_string},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", f_truncate},
    {"upper", f_upper},
    {"wordcount", f_wordcount},
};

}  // namespace

FilterFn find_text_filter(std::string_view name) {
  for (const auto& f : kTextFilters) {
    if (f.name == name) return f.fn;
  }
  return nullptr;
}

}  // namespace loom::text::jinja
