// Python methods and attributes of list/tuple, dict and numbers that templates call (tool.items(),
// d.get(k), 3.0.is_integer(), ...); str methods are in str_methods.cpp. Mutating methods exist as
// attributes but are sandbox-unsafe, as in ImmutableSandboxedEnvironment.
#include <algorithm>
#include <cmath>
#include <functional>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {

bool find_str_method(const Value& self, std::string_view name, Value* out);  // str_methods.cpp

namespace {

using Method = Value (*)(Interpreter&, const Value& self, CallArgs& args);

struct MethodEntry {
  std::string_view name;
  Method fn;
};

// ---- list / tuple ----

Value m_list_index(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("index", args, {"value", "start", "stop"});
  const Value& needle = a.required(0);
  const auto& items = self.items();
  int64_t b, e;
  clamp_range(static_cast<int64_t>(items.size()), a.has(1) ? &a.get(1) : nullptr,
              a.has(2) ? &a.get(2) : nullptr, &b, &e);
  for (int64_t i = b; i < e; ++i) {
    if (equals(items[static_cast<size_t>(i)], needle)) return Value::integer(i);
  }
  throw_type_error(repr(needle) + " is not in " + self.type_name());
}

Value m_list_count(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("count", args, {"value"});
  const Value& needle = a.required(0);
  int64_t n = 0;
  for (const Value& e : self.items()) n += equals(e, needle) ? 1 : 0;
  return Value::integer(n);
}

Value m_list_copy(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("copy", args, {});
  return Value::list(self.items());
}

constexpr MethodEntry kListMethods[] = {
    {"index", m_list_index}, {"count", m_list_count}, {"copy", m_list_copy}};
constexpr MethodEntry kTupleMethods[] = {{"index", m_list_index}, {"count", m_list_count}};
constexpr std::string_view kListUnsafe[] = {"append", "clear",  "extend",  "insert",
                                            "pop",    "remove", "reverse", "sort"};

// ---- dict ----

Value dict_view(const Value& self, SeqKind kind) {
  auto d = std::make_shared<ListData>();
  d->seq = kind;
  for (const auto& [k, v] : self.as_dict().entries) {
    if (kind == SeqKind::kDictKeys) {
      d->items.push_back(k);
    } else if (kind == SeqKind::kDictValues) {
      d->items.push_back(v);
    } else {
      d->items.push_back(Value::tuple({k, v}));
    }
  }
  return Value::sequence(std::move(d));
}

Value m_dict_items(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("items", args, {});
  return dict_view(self, SeqKind::kDictItems);
}
Value m_dict_keys(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("keys", args, {});
  return dict_view(self, SeqKind::kDictKeys);
}
Value m_dict_values(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("values", args, {});
  return dict_view(self, SeqKind::kDictValues);
}
Value m_dict_get(Interpreter&, const Value& self, CallArgs& args) {
  if (!args.kwargs.empty()) throw_type_error("get() takes no keyword arguments");
  ArgBinder a("get", args, {"key", "default"});
  const Value* v = self.as_dict().find(a.required(0));
  if (v != nullptr) return *v;
  return a.get_or(1, Value::none());
}
Value m_dict_copy(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("copy", args, {});
  return Value::dict(std::make_shared<DictData>(self.as_dict()));
}

}  // namespace

Value dict_fromkeys(Interpreter&, const Value&, CallArgs& args) {
  ArgBinder a("fromkeys", args, {"iterable", "value"});
  Value fill = a.get_or(1, Value::none());
  auto d = std::make_shared<DictData>();
  for (Value& k : iterate(a.required(0))) d->insert_or_assign(std::move(k), fill);
  return Value::dict(std::move(d));
}

namespace {

constexpr MethodEntry kDictMethods[] = {{"items", m_dict_items},   {"keys", m_dict_keys},
                                        {"values", m_dict_values}, {"get", m_dict_get},
                                        {"copy", m_dict_copy},     {"fromkeys", dict_fromkeys}};
constexpr std::string_view kDictUnsafe[] = {"clear", "pop", "popitem", "setdefault", "update"};

// ---- numbers ----

Value m_int_bit_length(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("bit_length", args, {});
  uint64_t v =
      self.as_int() < 0 ? 0 - static_cast<uint64_t>(self.as_int()) : static_cast<uint64_t>(self.as_int());
  int64_t n = 0;
  while (v != 0) {
    ++n;
    v >>= 1;
  }
  return Value::integer(n);
}
Value m_int_conjugate(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("conjugate", args, {});
  return Value::integer(self.as_int());
}
Value m_float_conjugate(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("conjugate", args, {});
  return self;
}
Value m_float_is_integer(Interpreter&, const Value& self, CallArgs& args) {
  ArgBinder a("is_integer", args, {});
  double f = self.as_double();
  return Value::boolean(std::isfinite(f) && f == std::floor(f));
}

constexpr MethodEntry kIntMethods[] = {{"bit_length", m_int_bit_length}, {"conjugate", m_int_conjugate}};
constexpr MethodEntry kFloatMethods[] = {{"conjugate", m_float_conjugate},
                                         {"is_integer", m_float_is_integer}};

// Data attributes of int/float (real, imag, numerator, denominator).
bool number_attribute(const Value& self, std::string_view name, Value* out) {
  if (self.is_integral()) {
    if (name == "real" || name == "numerator") {
      *out = Value::integer(self.as_int());
    } else if (name == "imag") {
      *out = Value::integer(0);
    } else if (name == "denominator") {
      *out = Value::integer(1);
    } else {
      return false;
    }
    return true;
  }
  if (name == "real") {
    *out = self;
  } else if (name == "imag") {
    *out = Value::number(0.0);
  } else {
    return false;
  }
  return true;
}

template <size_t N>
bool lookup_table(const MethodEntry (&table)[N], const Value& self, std::string_view name, Value* out) {
  for (const auto& e : table) {
    if (e.name == name) {
      *out = make_builtin(std::string(name), e.fn, self);
      return true;
    }
  }
  return false;
}

template <size_t N>
bool lookup_unsafe(const std::string_view (&names)[N], const Value& self, std::string_view name, Value* out) {
  for (auto n : names) {
    if (n == name) {
      *out = Value::unsafe_attr(self, name);
      return true;
    }
  }
  return false;
}

}  // namespace

bool find_method(const Value& self, std::string_view name, Value* out) {
  switch (self.kind()) {
    case ValueKind::kString: return find_str_method(self, name, out);
    case ValueKind::kList:
      if (self.seq_kind() == SeqKind::kList) {
        return lookup_table(kListMethods, self, name, out) || lookup_unsafe(kListUnsafe, self, name, out);
      }
      if (self.seq_kind() == SeqKind::kTuple) return lookup_table(kTupleMethods, self, name, out);
      if (self.seq_kind() == SeqKind::kRange) {
        const ListData& r = self.as_list();
        if (name == "start" || name == "stop" || name == "step") {
          *out = Value::integer(name == "start" ? r.range_start
                                                : (name == "stop" ? r.range_stop : r.range_step));
          return true;
        }
        return lookup_table(kTupleMethods, self, name, out);  // index, count
      }
      return false;
    case ValueKind::kDict:
      return lookup_table(kDictMethods, self, name, out) || lookup_unsafe(kDictUnsafe, self, name, out);
    case ValueKind::kBool:
    case ValueKind::kInt:
      return number_attribute(self, name, out) || lookup_table(kIntMethods, self, name, out);
    case ValueKind::kFloat:
      return number_attribute(self, name, out) || lookup_table(kFloatMethods, self, name, out);
    default: return false;
  }
}

}  // namespace loom::text::jinja
