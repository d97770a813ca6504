// Python str methods reachable from templates (content.startswith(...), s.split('</think>'), ...),
// with Python's code point indexing and Unicode whitespace / case rules.
#include <algorithm>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs& args);

struct MethodEntry {
  std::string_view name;
  Method fn;
};

// ---- string helpers (code point based where Python's indices are) ----

const std::string& self_str(const Value& self) {
  return self.as_string();
}

Value str_result(std::string s) {
  return Value::string(std::move(s));
}

// Byte offset of code point index i.
size_t byte_offset(const std::string& s, int64_t i) {
  size_t pos = 0;
  for (int64_t k = 0; k < i && pos < s.size(); ++k) unicode::decode(s, &pos);
  return pos;
}

int64_t cp_index(const std::string& s, size_t byte) {
  return static_cast<int64_t>(unicode::length(std::string_view(s).substr(0, byte)));
}

// The substring s[start:end] by code points, plus its byte offset in s.
std::string_view sub_range(const std::string& s, const Value* start, const Value* end, size_t* base) {
  int64_t n = static_cast<int64_t>(unicode::length(s));
  int64_t b, e;
  clamp_range(n, start, end, &b, &e);
  if (e < b) e = b;
  size_t bb = byte_offset(s, b);
  size_t eb = byte_offset(s, e);
  *base = bb;
  return std::string_view(s).substr(bb, eb - bb);
}

bool is_strip_char(char32_t cp, const std::u32string* chars) {
  if (chars == nullptr) return unicode::is_space(cp);
  return chars->find(cp) != std::u32string::npos;
}

// Start of the code point that ends at byte `end` (end > 0).
size_t prev_cp_start(const std::string& s, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t pos = start;
  unicode::decode(s, &pos);
  return pos == end ? start : end - 1;  // invalid sequences decode byte by byte
}

// str.strip/lstrip/rstrip: only the two ends are decoded.
std::string strip_impl(const std::string& s, const Value* chars_v, bool left, bool right) {
  std::u32string chars;
  const std::u32string* set = nullptr;
  if (chars_v != nullptr && !chars_v->is_none()) {
    chars = unicode::to_u32(str_arg(*chars_v, "strip arg"));
    set = &chars;
  }
  size_t b = 0, e = s.size();
  if (left) {
    while (b < e) {
      size_t next = b;
      if (!is_strip_char(unicode::decode(s, &next), set)) break;
      b = next;
    }
  }
  if (right) {
    while (e > b) {
      size_t start = prev_cp_start(s, e);
      size_t pos = start;
      if (!is_strip_char(unicode::decode(s, &pos), set)) break;
      e = start;
    }
  }
  return s.substr(b, e - b);
}

Value m_strip(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("strip", args, {"chars"});
  return str_result(strip_impl(self_str(self), a.has(0) ? &a.get(0) : nullptr, true, true));
}
Value m_lstrip(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("lstrip", args, {"chars"});
  return str_result(strip_impl(self_str(self), a.has(0) ? &a.get(0) : nullptr, true, false));
}
Value m_rstrip(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("rstrip", args, {"chars"});
  return str_result(strip_impl(self_str(self), a.has(0) ? &a.get(0) : nullptr, false, true));
}

std::vector<std::string> prefixes_of(const Value& v, const char* fn) {
  if (v.is_string()) return {v.as_string()};
  if (v.is_tuple()) {
    std::vector<std::string> out;
    for (const Value& e : v.items()) {
      if (!e.is_string())
        throw_type_error(std::string("tuple for ") + fn + " must only contain str, not " + e.type_name());
      out.push_back(e.as_string());
    }
    return out;
  }
  throw_type_error(std::string(fn) + " first arg must be str or a tuple of str, not " + v.type_name());
}

Value affix_test(const Value& self, CallArgs& args, const char* fn, bool prefix) {
  ArgBinder a(fn, args, {"prefix", "start", "end"});
  std::vector<std::string> options = prefixes_of(a.required(0), fn);
  size_t base;
  std::string_view s =
      sub_range(self_str(self), a.has(1) ? &a.get(1) : nullptr, a.has(2) ? &a.get(2) : nullptr, &base);
  for (const auto& p : options) {
    if (p.size() > s.size()) continue;
    if (prefix ? s.substr(0, p.size()) == p : s.substr(s.size() - p.size()) == p) return Value::boolean(true);
  }
  return Value::boolean(false);
}

Value m_startswith(Interpreter&, const Value& self, CallArgs& args) {
  return affix_test(self, args, "startswith", true);
}
Value m_endswith(Interpreter&, const Value& self, CallArgs& args) {
  return affix_test(self, args, "endswith", false);
}

int64_t find_impl(const Value& self, CallArgs& args, const char* fn, bool reverse) {
  ArgBinder a(fn, args, {"sub", "start", "end"});
  std::string sub = str_arg(a.required(0), "must be");
  const std::string& s = self_str(self);
  size_t base;
  std::string_view range =
      sub_range(s, a.has(1) ? &a.get(1) : nullptr, a.has(2) ? &a.get(2) : nullptr, &base);
  size_t at = reverse ? range.rfind(sub) : range.find(sub);
  if (at == std::string_view::npos) {
    // Python finds "" at the clamped start even when start > len; sub_range already clamped it.
    return -1;
  }
  return cp_index(s, base + at);
}

Value m_find(Interpreter&, const Value& self, CallArgs& args) {
  return Value::integer(find_impl(self, args, "find", false));
}
Value m_rfind(Interpreter&, const Value& self, CallArgs& args) {
  return Value::integer(find_impl(self, args, "rfind", true));
}
Value m_index(Interpreter&, const Value& self, CallArgs& args) {
  int64_t i = find_impl(self, args, "index", false);
  if (i < 0) throw_type_error("substring not found");
  return Value::integer(i);
}
Value m_rindex(Interpreter&, const Value& self, CallArgs& args) {
  int64_t i = find_impl(self, args, "rindex", true);
  if (i < 0) throw_type_error("substring not found");
  return Value::integer(i);
}

Value m_count(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("count", args, {"sub", "start", "end"});
  std::string sub = str_arg(a.required(0), "must be");
  size_t base;
  std::string_view range =
      sub_range(self_str(self), a.has(1) ? &a.get(1) : nullptr, a.has(2) ? &a.get(2) : nullptr, &base);
  if (sub.empty()) return Value::integer(static_cast<int64_t>(unicode::length(range)) + 1);
  int64_t n = 0;
  size_t pos = 0;
  while ((pos = range.find(sub, pos)) != std::string_view::npos) {
    ++n;
    pos += sub.size();
  }
  return Value::integer(n);
}

std::string replace_impl(const std::string& s, const std::string& old, const std::string& repl,
                         int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end, up to count times.
    int64_t done = 0;
    size_t pos = 0;
    while (pos <= s.size()) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (pos == s.size()) break;
      size_t next = pos;
      unicode::decode(s, &next);
      out.append(s, pos, next - pos);
      pos = next;
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, pos);
    if (at == std::string::npos) break;
    out.append(s, pos, at - pos);
    out += repl;
    pos = at + old.size();
    ++done;
  }
  out.append(s, pos, std::string::npos);
  return out;
}

Value m_replace(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("replace", args, {"old", "new", "count"});
  std::string old = str_arg(a.required(0), "replace() argument 1");
  std::string repl = str_arg(a.required(1), "replace() argument 2");
  int64_t count = a.has(2) ? to_index(a.get(2), "replace count") : -1;
  return str_result(replace_impl(self_str(self), old, repl, count));
}

std::vector<Value> split_whitespace(const std::u32string& u, int64_t maxsplit, bool reverse) {
  std::vector<Value> out;
  if (!reverse) {
    size_t i = 0, n = u.size();
    while (true) {
      while (i < n && unicode::is_space(u[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        size_t e = n;
        out.push_back(Value::string(unicode::to_utf8(std::u32string_view(u).substr(i, e - i))));
        break;
      }
      size_t j = i;
      while (j < n && !unicode::is_space(u[j])) ++j;
      out.push_back(Value::string(unicode::to_utf8(std::u32string_view(u).substr(i, j - i))));
      i = j;
    }
    return out;
  }
  int64_t i = static_cast<int64_t>(u.size()) - 1;
  while (true) {
    while (i >= 0 && unicode::is_space(u[static_cast<size_t>(i)])) --i;
    if (i < 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
      out.push_back(
          Value::string(unicode::to_utf8(std::u32string_view(u).substr(0, static_cast<size_t>(i) + 1))));
      break;
    }
    int64_t j = i;
    while (j >= 0 && !unicode::is_space(u[static_cast<size_t>(j)])) --j;
    out.push_back(Value::string(unicode::to_utf8(
        std::u32string_view(u).substr(static_cast<size_t>(j + 1), static_cast<size_t>(i - j)))));
    i = j;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

Value split_impl(const Value& self, CallArgs& args, const char* fn, bool reverse) {
  ArgBinder a(fn, args, {"sep", "maxsplit"});
  int64_t maxsplit = a.has(1) ? to_index(a.get(1), "maxsplit") : -1;
  const std::string& s = self_str(self);
  if (!a.has(0) || a.get(0).is_none())
    return Value::list(split_whitespace(unicode::to_u32(s), maxsplit, reverse));
  std::string sep = str_arg(a.get(0), "must be");
  if (sep.empty()) throw_type_error("empty separator");
  std::vector<Value> out;
  if (!reverse) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t at = s.find(sep, pos);
      if (at == std::string::npos) break;
      out.push_back(Value::string(s.substr(pos, at - pos)));
      pos = at + sep.size();
    }
    out.push_back(Value::string(s.substr(pos)));
    return Value::list(std::move(out));
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep.size()) break;
    size_t at = s.rfind(sep, end - sep.size());
    if (at == std::string::npos) break;
    out.push_back(Value::string(s.substr(at + sep.size(), end - at - sep.size())));
    end = at;
  }
  out.push_back(Value::string(s.substr(0, end)));
  std::reverse(out.begin(), out.end());
  return Value::list(std::move(out));
}

Value m_split(Interpreter&, const Value& self, CallArgs& args) {
  return split_impl(self, args, "split", false);
}
Value m_rsplit(Interpreter&, const Value& self, CallArgs& args) {
  return split_impl(self, args, "rsplit", true);
}

bool is_line_break(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

Value m_splitlines(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("splitlines", args, {"keepends"});
  bool keepends = a.has(0) && truthy(a.get(0));
  std::u32string u = unicode::to_u32(self_str(self));
  std::vector<Value> out;
  size_t i = 0, n = u.size();
  while (i < n) {
    size_t j = i;
    while (j < n && !is_line_break(u[j])) ++j;
    size_t eol = j;
    if (j < n) {
      j += (u[j] == '\r' && j + 1 < n && u[j + 1] == '\n') ? 2 : 1;
      if (keepends) eol = j;
    }
    out.push_back(Value::string(unicode::to_utf8(std::u32string_view(u).substr(i, eol - i))));
    i = j;
  }
  return Value::list(std::move(out));
}

Value m_join(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("join", args, {"iterable"});
  std::vector<Value> items = iterate(a.required(0));
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (!items[i].is_string()) {
      throw_type_error("sequence item " + std::to_string(i) + ": expected str instance, " +
                       items[i].type_name() + " found");
    }
    if (i > 0) out += self_str(self);
    out += items[i].as_string();
  }
  return str_result(std::move(out));
}

Value m_upper(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("upper", args, {});
  return str_result(unicode::upper(self_str(self)));
}
Value m_lower(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("lower", args, {});
  return str_result(unicode::lower(self_str(self)));
}

Value m_swapcase(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("swapcase", args, {});
  const std::string& s = self_str(self);
  std::string out;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    if (unicode::is_upper(c)) {
      unicode::append_lower(out, c);
    } else if (unicode::is_lower(c)) {
      unicode::append_upper(out, c);
    } else {
      unicode::append(out, c);
    }
  }
  return str_result(std::move(out));
}

Value m_title(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("title", args, {});
  const std::string& s = self_str(self);
  std::string out;
  bool previous_cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    if (previous_cased) {
      unicode::append_lower(out, c);
    } else {
      unicode::append_title(out, c);
    }
    previous_cased = unicode::is_cased(c);
  }
  return str_result(std::move(out));
}

Value m_capitalize(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("capitalize", args, {});
  const std::string& s = self_str(self);
  std::string out;
  size_t pos = 0;
  bool first = true;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    if (first) {
      unicode::append_title(out, c);
    } else {
      unicode::append_lower(out, c);
    }
    first = false;
  }
  return str_result(std::move(out));
}

template <bool (*Pred)(char32_t)>
Value all_chars(const Value& self, CallArgs& args, const char* fn) {
  ArgBinder a(fn, args, {});
  const std::string& s = self_str(self);
  if (s.empty()) return Value::boolean(false);
  size_t pos = 0;
  while (pos < s.size()) {
    if (!Pred(unicode::decode(s, &pos))) return Value::boolean(false);
  }
  return Value::boolean(true);
}

Value m_isalpha(Interpreter&, const Value& self, CallArgs& args) {
  return all_chars<unicode::is_alpha>(self, args, "isalpha");
}
Value m_isdigit(Interpreter&, const Value& self, CallArgs& args) {
  return all_chars<unicode::is_digit>(self, args, "isdigit");
}
Value m_isdecimal(Interpreter&, const Value& self, CallArgs& args) {
  return all_chars<unicode::is_decimal>(self, args, "isdecimal");
}
Value m_isnumeric(Interpreter&, const Value& self, CallArgs& args) {
  return all_chars<unicode::is_digit>(self, args, "isnumeric");
}
Value m_isalnum(Interpreter&, const Value& self, CallArgs& args) {
  return all_chars<unicode::is_alnum>(self, args, "isalnum");
}
Value m_isspace(Interpreter&, const Value& self, CallArgs& args) {
  return all_chars<unicode::is_space>(self, args, "isspace");
}

Value m_isascii(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("isascii", args, {});
  return Value::boolean(unicode::is_ascii(self_str(self)));
}

// islower/isupper: at least one cased character and no cased character of the other case.
Value case_test(const Value& self, CallArgs& args, const char* fn, bool want_upper) {
  ArgBinder a(fn, args, {});
  const std::string& s = self_str(self);
  bool cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    if (want_upper ? (unicode::is_lower(c) || (unicode::is_cased(c) && !unicode::is_upper(c)))
                   : (unicode::is_upper(c) || (unicode::is_cased(c) && !unicode::is_lower(c)))) {
      return Value::boolean(false);
    }
    cased |= want_upper ? unicode::is_upper(c) : unicode::is_lower(c);
  }
  return Value::boolean(cased);
}
Value m_islower(Interpreter&, const Value& self, CallArgs& args) {
  return case_test(self, args, "islower", false);
}
Value m_isupper(Interpreter&, const Value& self, CallArgs& args) {
  return case_test(self, args, "isupper", true);
}

Value m_istitle(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("istitle", args, {});
  const std::string& s = self_str(self);
  bool cased = false, previous_cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    if (unicode::is_upper(c) || (unicode::is_cased(c) && !unicode::is_lower(c))) {
      if (previous_cased) return Value::boolean(false);
      previous_cased = cased = true;
    } else if (unicode::is_lower(c)) {
      if (!previous_cased) return Value::boolean(false);
      previous_cased = cased = true;
    } else {
      previous_cased = false;
    }
  }
  return Value::boolean(cased);
}

std::u32string fill_char(const ArgBinder& a, size_t i, const char* fn) {
  if (!a.has(i)) return U" ";
  std::u32string f = unicode::to_u32(str_arg(a.get(i), fn));
  if (f.size() != 1) throw_type_error(std::string("The fill character must be exactly one character long"));
  return f;
}

Value justify(const Value& self, CallArgs& args, const char* fn, int mode) {
  ArgBinder a(fn, args, {"width", "fillchar"});
  int64_t width = to_index(a.required(0), fn);
  std::u32string fill = fill_char(a, 1, fn);
  std::u32string u = unicode::to_u32(self_str(self));
  int64_t n = static_cast<int64_t>(u.size());
  if (width <= n) return self.is_markup() ? Value::string(self.as_string()) : self;
  size_t total = static_cast<size_t>(width - n);
  size_t left;
  if (mode < 0) {
    left = 0;
  } else if (mode > 0) {
    left = total;
  } else {
    // CPython centre: left = total/2 + (total & width & 1)
    left = total / 2 + (total & static_cast<size_t>(width) & 1);
  }
  std::u32string out(left, fill[0]);
  out += u;
  out.append(total - left, fill[0]);
  return str_result(unicode::to_utf8(out));
}

Value m_center(Interpreter&, const Value& self, CallArgs& args) {
  return justify(self, args, "center", 0);
}
Value m_ljust(Interpreter&, const Value& self, CallArgs& args) {
  return justify(self, args, "ljust", -1);
}
Value m_rjust(Interpreter&, const Value& self, CallArgs& args) {
  return justify(self, args, "rjust", 1);
}

Value m_zfill(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("zfill", args, {"width"});
  int64_t width = to_index(a.required(0), "zfill");
  std::u32string u = unicode::to_u32(self_str(self));
  int64_t n = static_cast<int64_t>(u.size());
  if (width <= n) return str_result(self_str(self));
  size_t fill = static_cast<size_t>(width - n);
  std::u32string out(fill, U'0');
  out += u;
  if (!u.empty() && (u[0] == '+' || u[0] == '-')) {
    out[0] = u[0];
    out[fill] = U'0';
  }
  return str_result(unicode::to_utf8(out));
}

Value partition_impl(const Value& self, CallArgs& args, const char* fn, bool reverse) {
  ArgBinder a(fn, args, {"sep"});
  std::string sep = str_arg(a.required(0), "must be");
  if (sep.empty()) throw_type_error("empty separator");
  const std::string& s = self_str(self);
  size_t at = reverse ? s.rfind(sep) : s.find(sep);
  if (at == std::string::npos) {
    if (reverse) return Value::tuple({Value::string(""), Value::string(""), Value::string(s)});
    return Value::tuple({Value::string(s), Value::string(""), Value::string("")});
  }
  return Value::tuple(
      {Value::string(s.substr(0, at)), Value::string(sep), Value::string(s.substr(at + sep.size()))});
}
Value m_partition(Interpreter&, const Value& self, CallArgs& args) {
  return partition_impl(self, args, "partition", false);
}
Value m_rpartition(Interpreter&, const Value& self, CallArgs& args) {
  return partition_impl(self, args, "rpartition", true);
}

Value m_removeprefix(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("removeprefix", args, {"prefix"});
  std::string p = str_arg(a.required(0), "removeprefix() argument");
  const std::string& s = self_str(self);
  return str_result(s.compare(0, p.size(), p) == 0 ? s.substr(p.size()) : s);
}

Value m_removesuffix(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("removesuffix", args, {"suffix"});
  std::string p = str_arg(a.required(0), "removesuffix() argument");
  const std::string& s = self_str(self);
  if (!p.empty() && s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0) {
    return str_result(s.substr(0, s.size() - p.size()));
  }
  return str_result(s);
}

Value m_format(Interpreter&, const Value& self, CallArgs& args) {
  return str_result(brace_format(self_str(self), args));
}

Value m_unsupported(Interpreter&, const Value& self, CallArgs&) {
  throw_type_error("this " + self.type_name() + " method is not supported by Loom's template engine");
}

constexpr MethodEntry kStrMethods[] = {
    {"capitalize", m_capitalize},
    {"casefold", m_lower},
    {"center", m_center},
    {"count", m_count},
    {"encode", m_unsupported},
    {"endswith", m_endswith},
    {"expandtabs", m_unsupported},
    {"find", m_find},
    {"format", m_format},
    {"format_map", m_unsupported},
    {"index", m_index},
    {"isalnum", m_isalnum},
    {"isalpha", m_isalpha},
    {"isascii", m_isascii},
    {"isdecimal", m_isdecimal},
    {"isdigit", m_isdigit},
    {"isidentifier", m_unsupported},
    {"islower", m_islower},
    {"isnumeric", m_isnumeric},
    {"isprintable", m_unsupported},
    {"isspace", m_isspace},
    {"istitle", m_istitle},
    {"isupper", m_isupper},
    {"join", m_join},
    {"ljust", m_ljust},
    {"lower", m_lower},
    {"lstrip", m_lstrip},
    {"maketrans", m_unsupported},
    {"partition", m_partition},
    {"removeprefix", m_removeprefix},
    {"removesuffix", m_removesuffix},
    {"replace", m_replace},
    {"rfind", m_rfind},
    {"rindex", m_rindex},
    {"rjust", m_rjust},
    {"rpartition", m_rpartition},
    {"rsplit", m_rsplit},
    {"rstrip", m_rstrip},
    {"split", m_split},
    {"splitlines", m_splitlines},
    {"startswith", m_startswith},
    {"strip", m_strip},
    {"swapcase", m_swapcase},
    {"title", m_title},
    {"translate", m_unsupported},
    {"upper", m_upper},
    {"zfill", m_zfill},
};

}  // namespace

bool find_str_method(const Value& self, std::string_view name, Value* out) {
  for (const auto& e : kStrMethods) {
    if (e.name == name) {
      *out = make_builtin(std::string(name), e.fn, self);
      return true;
    }
  }
  return false;
}

}  // namespace loom::text::jinja
