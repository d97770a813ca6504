#include "text/jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/check.h"
#include "text/jinja/error.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {

// ---- DictData ----

namespace {

// Key equality of a Python dict (hash-equal and ==) for keys known to be hashable.
bool same_key(const Value& a, const Value& b) {
  if (a.is_string() && b.is_string()) return a.as_string() == b.as_string();
  if (a.is_string() != b.is_string()) return false;
  return hash_key(a) == hash_key(b);
}

void require_hashable(const Value& key) {
  if (!is_hashable(key)) hash_key(key);  // throws TypeError
}

}  // namespace

const Value* DictData::find(const Value& key) const {
  if (index.empty()) {
    require_hashable(key);
    for (const auto& e : entries) {
      if (same_key(e.first, key)) return &e.second;
    }
    return nullptr;
  }
  auto it = index.find(hash_key(key));
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void DictData::insert_or_assign(Value key, Value value) {
  if (index.empty()) {
    require_hashable(key);
    for (auto& e : entries) {
      if (same_key(e.first, key)) {
        e.second = std::move(value);  // Python keeps the first key object and its position
        return;
      }
    }
    entries.emplace_back(std::move(key), std::move(value));
    if (entries.size() > kLinearMax) {
      for (size_t i = 0; i < entries.size(); ++i) index.emplace(hash_key(entries[i].first), i);
    }
    return;
  }
  std::string k = hash_key(key);
  auto it = index.find(k);
  if (it != index.end()) {
    entries[it->second].second = std::move(value);
    return;
  }
  index.emplace(std::move(k), entries.size());
  entries.emplace_back(std::move(key), std::move(value));
}

// ---- Object ----

std::string Object::repr() const {
  return "<" + type_name() + " object>";
}

bool Object::get_attr(const Value&, std::string_view, Value*) const {
  return false;
}

Value Object::call(Interpreter&, CallArgs&) {
  throw_type_error("'" + type_name() + "' object is not callable");
}

// ---- Value construction ----

Value Value::none() {
  Value v;
  v.kind_ = ValueKind::kNone;
  return v;
}

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = ValueKind::kBool;
  v.i_ = b ? 1 : 0;
  return v;
}

Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = ValueKind::kInt;
  v.i_ = i;
  return v;
}

Value Value::number(double f) {
  Value v;
  v.kind_ = ValueKind::kFloat;
  v.f_ = f;
  return v;
}

Value Value::string(std::string s) {
  Value v;
  v.kind_ = ValueKind::kString;
  v.heap_ = std::make_shared<StringData>(std::move(s));
  return v;
}

Value Value::markup(std::string s) {
  Value v = string(std::move(s));
  v.markup_ = true;
  return v;
}

Value Value::list(std::vector<Value> items) {
  auto d = std::make_shared<ListData>();
  d->items = std::move(items);
  return sequence(std::move(d));
}

Value Value::tuple(std::vector<Value> items) {
  auto d = std::make_shared<ListData>();
  d->items = std::move(items);
  d->seq = SeqKind::kTuple;
  return sequence(std::move(d));
}

Value Value::sequence(std::shared_ptr<ListData> data) {
  Value v;
  v.kind_ = ValueKind::kList;
  v.heap_ = std::move(data);
  return v;
}

Value Value::dict(std::shared_ptr<DictData> data) {
  Value v;
  v.kind_ = ValueKind::kDict;
  v.heap_ = std::move(data);
  return v;
}

Value Value::iterator(std::string type_name, std::vector<Value> items) {
  auto d = std::make_shared<IteratorData>();
  d->type_name = std::move(type_name);
  d->items = std::move(items);
  Value v;
  v.kind_ = ValueKind::kIterator;
  v.heap_ = std::move(d);
  return v;
}

Value Value::object(std::shared_ptr<Object> obj) {
  Value v;
  v.kind_ = ValueKind::kObject;
  v.heap_ = std::move(obj);
  return v;
}

Value Value::undefined(std::string name) {
  auto d = std::make_shared<UndefinedData>();
  d->name = std::move(name);
  Value v;
  v.heap_ = std::move(d);
  return v;
}

Value Value::undefined_hint(std::string hint) {
  auto d = std::make_shared<UndefinedData>();
  d->hint = std::move(hint);
  Value v;
  v.heap_ = std::move(d);
  return v;
}

namespace {

// jinja2.utils.object_type_repr
std::string object_type_repr(const Value& obj) {
  if (obj.is_none()) return "None";
  return obj.type_name() + " object";
}

}  // namespace

Value Value::undefined_attr(const Value& obj, std::string_view attr) {
  auto d = std::make_shared<UndefinedData>();
  d->name = std::string(attr);
  d->obj_type = object_type_repr(obj);
  Value v;
  v.heap_ = std::move(d);
  return v;
}

Value Value::undefined_item(const Value& obj, const Value& key) {
  if (key.is_string()) return undefined_attr(obj, key.as_string());
  auto d = std::make_shared<UndefinedData>();
  d->name = repr(key);
  d->obj_type = object_type_repr(obj);
  d->name_is_attr = false;
  Value v;
  v.heap_ = std::move(d);
  return v;
}

Value Value::unsafe_attr(const Value& obj, std::string_view attr) {
  Value v = undefined_hint("access to attribute " + str_repr(attr) + " of " + str_repr(obj.type_name()) +
                           " object is unsafe.");
  std::static_pointer_cast<UndefinedData>(v.heap_)->security = true;
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  return from_json(j, 0);
}

Value Value::from_json(const nlohmann::ordered_json& j, size_t depth) {
  if (depth > kMaxNesting) throw_error(ErrorKind::kLimit, "JSON value nested too deeply");
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return none();
    case nlohmann::ordered_json::value_t::boolean: return boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return number(static_cast<double>(u));
      return integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json(e, depth + 1));
      return list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      auto d = std::make_shared<DictData>();
      for (const auto& [k, e] : j.items()) d->insert_or_assign(string(k), from_json(e, depth + 1));
      return dict(std::move(d));
    }
    default: throw_type_error("unsupported JSON value (binary or discarded)");
  }
}

// ---- Accessors ----

double Value::as_double() const {
  return kind_ == ValueKind::kFloat ? f_ : static_cast<double>(i_);
}

const std::string& Value::as_string() const {
  LOOM_CHECK(kind_ == ValueKind::kString) << "not a string";
  return static_cast<const StringData*>(heap_.get())->s;
}

const ListData& Value::as_list() const {
  LOOM_CHECK(kind_ == ValueKind::kList) << "not a list";
  return *static_cast<const ListData*>(heap_.get());
}

const std::vector<Value>& Value::items() const {
  return as_list().items;
}

const DictData& Value::as_dict() const {
  LOOM_CHECK(kind_ == ValueKind::kDict) << "not a dict";
  return *static_cast<const DictData*>(heap_.get());
}

IteratorData& Value::as_iterator() const {
  LOOM_CHECK(kind_ == ValueKind::kIterator) << "not an iterator";
  return *static_cast<IteratorData*>(heap_.get());
}

Object& Value::as_object() const {
  LOOM_CHECK(kind_ == ValueKind::kObject) << "not an object";
  return *static_cast<Object*>(heap_.get());
}

const UndefinedData* Value::undefined_data() const {
  if (kind_ != ValueKind::kUndefined) return nullptr;
  return static_cast<const UndefinedData*>(heap_.get());
}

std::string Value::undefined_message() const {
  const UndefinedData* d = undefined_data();
  if (d == nullptr) return "None is undefined";  // jinja2: repr(None) of the missing name
  if (!d->hint.empty()) return d->hint;
  if (d->obj_type.empty()) return str_repr(d->name) + " is undefined";
  if (!d->name_is_attr) return d->obj_type + " has no element " + d->name;
  return str_repr(d->obj_type) + " has no attribute " + str_repr(d->name);
}

void Value::fail_undefined() const {
  const UndefinedData* d = undefined_data();
  throw TemplateError(d != nullptr && d->security ? ErrorKind::kSecurity : ErrorKind::kUndefined,
                      undefined_message());
}

std::string Value::type_name() const {
  switch (kind_) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kNone: return "NoneType";
    case ValueKind::kBool: return "bool";
    case ValueKind::kInt: return "int";
    case ValueKind::kFloat: return "float";
    case ValueKind::kString: return markup_ ? "Markup" : "str";
    case ValueKind::kList:
      switch (as_list().seq) {
        case SeqKind::kList: return "list";
        case SeqKind::kTuple: return "tuple";
        case SeqKind::kDictKeys: return "dict_keys";
        case SeqKind::kDictValues: return "dict_values";
        case SeqKind::kDictItems: return "dict_items";
        case SeqKind::kRange: return "range";
      }
      return "list";
    case ValueKind::kDict: return "dict";
    case ValueKind::kIterator: return as_iterator().type_name;
    case ValueKind::kObject: return as_object().type_name();
  }
  return "object";
}

// ---- Python semantics ----

bool truthy(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return false;
    case ValueKind::kBool:
    case ValueKind::kInt: return v.as_int() != 0;
    case ValueKind::kFloat: return v.as_double() != 0.0;
    case ValueKind::kString: return !v.as_string().empty();
    case ValueKind::kList: return !v.items().empty();
    case ValueKind::kDict: return !v.as_dict().entries.empty();
    case ValueKind::kIterator:
    case ValueKind::kObject: return true;
  }
  return true;
}

std::string float_repr(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  if (f == 0.0) return std::signbit(f) ? "-0.0" : "0.0";
  // Shortest round-trip digits (as Python's repr), then Python's layout: fixed notation while the
  // decimal exponent is in [-4, 16), scientific with a two-digit exponent otherwise.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::scientific);
  std::string_view s(buf, static_cast<size_t>(res.ptr - buf));
  std::string out;
  if (s.front() == '-') {
    out.push_back('-');
    s.remove_prefix(1);
  }
  size_t epos = s.find('e');
  std::string digits(1, s[0]);
  if (s.size() > 1 && s[1] == '.') digits.append(s.substr(2, epos - 2));
  int exp = 0;
  std::from_chars(s.data() + epos + (s[epos + 1] == '+' ? 2 : 1), s.data() + s.size(), exp);
  int decpt = exp + 1;  // value = 0.<digits> * 10^decpt
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out.push_back(digits[0]);
    if (n > 1) {
      out.push_back('.');
      out.append(digits, 1);
    }
    out.push_back('e');
    out.push_back(exp < 0 ? '-' : '+');
    int a = exp < 0 ? -exp : exp;
    if (a < 10) out.push_back('0');
    out += std::to_string(a);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= n) {
    out += digits;
    out.append(static_cast<size_t>(decpt - n), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out.push_back('.');
    out.append(digits, static_cast<size_t>(decpt));
  }
  return out;
}

std::string str_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char32_t quote = (has_single && !has_double) ? U'"' : U'\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(static_cast<char>(quote));
  size_t pos = 0;
  char buf[16];
  while (pos < s.size()) {
    char32_t cp = unicode::decode(s, &pos);
    if (cp == quote || cp == U'\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == U'\t') {
      out += "\\t";
    } else if (cp == U'\n') {
      out += "\\n";
    } else if (cp == U'\r') {
      out += "\\r";
    } else if (cp < 0x20 || cp == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
      out += buf;
    } else if (cp < 0x7F) {
      out.push_back(static_cast<char>(cp));
    } else if (unicode::is_printable(cp)) {
      unicode::append(out, cp);
    } else {
      unicode::append_escaped(out, cp);
    }
  }
  out.push_back(static_cast<char>(quote));
  return out;
}

namespace {

// Containers being repr'd on this thread (CPython's Py_ReprEnter): a container met again inside its
// own repr prints as "[...]" / "{...}" / "(...)". Namespaces make cyclic structures possible.
thread_local std::vector<const void*> t_repr_stack;

class ReprGuard {
 public:
  explicit ReprGuard(const void* id) : id_(id) {
    active_ = std::find(t_repr_stack.begin(), t_repr_stack.end(), id) != t_repr_stack.end();
    if (!active_) {
      if (t_repr_stack.size() >= kMaxNesting)
        throw_error(ErrorKind::kLimit, "maximum recursion depth exceeded");
      t_repr_stack.push_back(id);
    }
  }
  ~ReprGuard() {
    if (!active_) t_repr_stack.pop_back();
  }
  bool recursive() const { return active_; }

 private:
  const void* id_;
  bool active_;
};

void append_joined_reprs(std::string& out, const std::vector<Value>& items) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ", ";
    out += repr(items[i]);
  }
}

std::string list_repr(const Value& v) {
  const ListData& d = v.as_list();
  ReprGuard guard(&d);
  if (guard.recursive()) return d.seq == SeqKind::kTuple ? "(...)" : "[...]";
  std::string out;
  switch (d.seq) {
    case SeqKind::kTuple:
      out = "(";
      append_joined_reprs(out, d.items);
      if (d.items.size() == 1) out += ",";
      out += ")";
      return out;
    case SeqKind::kRange:
      out = "range(" + std::to_string(d.range_start) + ", " + std::to_string(d.range_stop);
      if (d.range_step != 1) out += ", " + std::to_string(d.range_step);
      return out + ")";
    case SeqKind::kDictKeys: out = "dict_keys(["; break;
    case SeqKind::kDictValues: out = "dict_values(["; break;
    case SeqKind::kDictItems: out = "dict_items(["; break;
    case SeqKind::kList: out = "["; break;
  }
  append_joined_reprs(out, d.items);
  out += d.seq == SeqKind::kList ? "]" : "])";
  return out;
}

}  // namespace

std::string dict_repr(const DictData& d) {
  ReprGuard guard(&d);
  if (guard.recursive()) return "{...}";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, e] : d.entries) {
    if (!first) out += ", ";
    first = false;
    out += repr(k);
    out += ": ";
    out += repr(e);
  }
  return out + "}";
}

std::string repr(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "Undefined";
    case ValueKind::kString:
      if (v.is_markup()) return "Markup(" + str_repr(v.as_string()) + ")";
      return str_repr(v.as_string());
    case ValueKind::kList: return list_repr(v);
    case ValueKind::kDict: return dict_repr(v.as_dict());
    case ValueKind::kIterator: return "<" + v.as_iterator().type_name + " object>";
    case ValueKind::kObject: return v.as_object().repr();
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "";
    case ValueKind::kNone: return "None";
    case ValueKind::kBool: return v.as_bool() ? "True" : "False";
    case ValueKind::kInt: return std::to_string(v.as_int());
    case ValueKind::kFloat: return float_repr(v.as_double());
    case ValueKind::kString: return v.as_string();
    default: return repr(v);
  }
}

namespace {

// Bounds the recursion of equality/ordering over nested (possibly cyclic) containers, as Python's
// RecursionError does.
thread_local size_t t_compare_depth = 0;

class DepthScope {
 public:
  DepthScope() {
    if (++t_compare_depth > kMaxNesting) {
      --t_compare_depth;
      throw_error(ErrorKind::kLimit, "maximum recursion depth exceeded in comparison");
    }
  }
  ~DepthScope() { --t_compare_depth; }
};

}  // namespace

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kNone: return true;
    case ValueKind::kString: return a.as_string() == b.as_string();
    case ValueKind::kList: {
      DepthScope depth;
      const ListData& x = a.as_list();
      const ListData& y = b.as_list();
      // list == tuple is False in Python; dict views and ranges compare as their own types.
      if (x.seq != y.seq) return false;
      if (x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i) {
        if (!equals(x.items[i], y.items[i])) return false;
      }
      return true;
    }
    case ValueKind::kDict: {
      DepthScope depth;
      const DictData& x = a.as_dict();
      const DictData& y = b.as_dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, e] : x.entries) {
        const Value* other = y.find(k);
        if (other == nullptr || !equals(e, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int compare(const Value& a, const Value& b, std::string_view op) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined()) b.fail_undefined();
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);  // NaN compares as "equal" here; every ordering test is false
    }
    return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order equals code point order.
    int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.seq_kind() == b.seq_kind() &&
      (a.seq_kind() == SeqKind::kList || a.seq_kind() == SeqKind::kTuple)) {
    DepthScope depth;
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!equals(x[i], y[i])) return compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  throw_type_error("'" + std::string(op) + "' not supported between instances of '" + a.type_name() +
                   "' and '" + b.type_name() + "'");
}

std::string hash_key(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return "U";
    case ValueKind::kNone: return "N";
    case ValueKind::kBool:
    case ValueKind::kInt: return "i" + std::to_string(v.as_int());
    case ValueKind::kFloat: {
      double f = v.as_double();
      if (std::isfinite(f) && f == std::trunc(f) && std::fabs(f) < 9.2e18) {
        return "i" + std::to_string(static_cast<int64_t>(f));
      }
      return "f" + float_repr(f);
    }
    case ValueKind::kString: return "s" + v.as_string();
    case ValueKind::kList:
      if (v.seq_kind() == SeqKind::kRange) {
        // Python: hash((len(r), r.start, r.step)); equal ranges have equal items.
        const auto& items = v.items();
        if (items.empty()) return "R0";
        return "R" + std::to_string(items.size()) + ":" + std::to_string(items[0].as_int()) + ":" +
               std::to_string(v.as_list().range_step);
      }
      if (v.seq_kind() == SeqKind::kTuple) {
        std::string out = "t";
        for (const Value& e : v.items()) {
          std::string k = hash_key(e);
          out += std::to_string(k.size());
          out.push_back(':');
          out += k;
        }
        return out;
      }
      break;
    case ValueKind::kDict:
    case ValueKind::kIterator: break;
    case ValueKind::kObject: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "o%p", static_cast<const void*>(v.identity()));
      return buf;
    }
  }
  throw_type_error("unhashable type: '" + v.type_name() + "'");
}

bool is_hashable(const Value& v) {
  if (v.is_dict() || v.is_iterator()) return false;
  if (v.is_list()) return v.seq_kind() == SeqKind::kTuple || v.seq_kind() == SeqKind::kRange;
  return true;
}

int64_t length(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return 0;
    case ValueKind::kString: return static_cast<int64_t>(unicode::length(v.as_string()));
    case ValueKind::kList: return static_cast<int64_t>(v.items().size());
    case ValueKind::kDict: return static_cast<int64_t>(v.as_dict().entries.size());
    default: break;
  }
  throw_type_error("object of type '" + v.type_name() + "' has no len()");
}

bool is_iterable(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined:
    case ValueKind::kString:
    case ValueKind::kList:
    case ValueKind::kDict:
    case ValueKind::kIterator: return true;
    default: return false;
  }
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case ValueKind::kUndefined: return {};
    case ValueKind::kString: {
      std::vector<Value> out;
      const std::string& s = v.as_string();
      size_t pos = 0;
      while (pos < s.size()) {
        size_t start = pos;
        unicode::decode(s, &pos);
        out.push_back(Value::string(s.substr(start, pos - start)));
      }
      return out;
    }
    case ValueKind::kList: return v.items();
    case ValueKind::kDict: {
      std::vector<Value> out;
      out.reserve(v.as_dict().entries.size());
      for (const auto& e : v.as_dict().entries) out.push_back(e.first);
      return out;
    }
    case ValueKind::kIterator: {
      IteratorData& it = v.as_iterator();
      std::vector<Value> out(it.items.begin() + static_cast<std::ptrdiff_t>(it.pos), it.items.end());
      it.pos = it.items.size();
      return out;
    }
    default: break;
  }
  throw_type_error("'" + v.type_name() + "' object is not iterable");
}

}  // namespace loom::text::jinja
