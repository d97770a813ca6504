// jinja2's built-in tests (jinja2/tests.py): `x is defined`, `x is string`, `x is divisibleby(3)`, ...
#include <cmath>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/objects.h"
#include "text/jinja/ops.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

void no_args(const char* name, const CallArgs& args) {
  ArgBinder(name, args, {});
}

bool t_defined(Interpreter&, const Value& v, CallArgs& a) {
  no_args("defined", a);
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) {
  no_args("undefined", a);
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallArgs& a) {
  no_args("none", a);
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) {
  no_args("boolean", a);
  return v.is_bool();
}
bool t_false(Interpreter&, const Value& v, CallArgs& a) {
  no_args("false", a);
  return v.is_bool() && !v.as_bool();
}
bool t_true(Interpreter&, const Value& v, CallArgs& a) {
  no_args("true", a);
  return v.is_bool() && v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, CallArgs& a) {
  no_args("integer", a);
  return v.is_int();
}
bool t_float(Interpreter&, const Value& v, CallArgs& a) {
  no_args("float", a);
  return v.is_float();
}
bool t_number(Interpreter&, const Value& v, CallArgs& a) {
  no_args("number", a);
  return v.is_number();
}
bool t_string(Interpreter&, const Value& v, CallArgs& a) {
  no_args("string", a);
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) {
  no_args("mapping", a);
  return v.is_dict();
}
bool t_escaped(Interpreter&, const Value& v, CallArgs& a) {
  no_args("escaped", a);
  return v.is_markup();
}

bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  no_args("iterable", a);
  // LoopContext defines __iter__ too.
  return is_iterable(v) || v.object_as<LoopObject>() != nullptr;
}

// jinja2: len(value) and value.__getitem__ both work. Undefined has both (its __getitem__ raises).
bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
  no_args("sequence", a);
  if (v.is_undefined() || v.is_string() || v.is_dict()) return true;
  if (v.is_list()) {
    SeqKind k = v.seq_kind();
    return k == SeqKind::kList || k == SeqKind::kTuple || k == SeqKind::kRange;
  }
  return false;
}

bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  no_args("callable", a);
  // jinja2's Undefined defines __call__ (raising), so callable(undefined) is True.
  return v.is_undefined() || (v.is_object() && v.as_object().callable());
}

bool t_lower(Interpreter&, const Value& v, CallArgs& a) {
  no_args("lower", a);
  std::string s = to_str(v);
  bool cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    if (unicode::is_upper(c) || (unicode::is_cased(c) && !unicode::is_lower(c))) return false;
    cased |= unicode::is_lower(c);
  }
  return cased;
}

bool t_upper(Interpreter&, const Value& v, CallArgs& a) {
  no_args("upper", a);
  std::string s = to_str(v);
  bool cased = false;
  size_t pos = 0;
  while (pos < s.size()) {
    char32_t c = unicode::decode(s, &pos);
    if (unicode::is_lower(c) || (unicode::is_cased(c) && !unicode::is_upper(c))) return false;
    cased |= unicode::is_upper(c);
  }
  return cased;
}

bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  no_args("odd", a);
  return equals(binary_op(BinaryOp::kMod, v, Value::integer(2)), Value::integer(1));
}

bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  no_args("even", a);
  return equals(binary_op(BinaryOp::kMod, v, Value::integer(2)), Value::integer(0));
}

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("divisibleby", args, {"num"});
  return equals(binary_op(BinaryOp::kMod, v, a.required(0)), Value::integer(0));
}

bool t_eq(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("eq", args, {"other"});
  return equals(v, a.required(0));
}
bool t_ne(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("ne", args, {"other"});
  return !equals(v, a.required(0));
}
bool t_lt(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("lt", args, {"other"});
  return compare(v, a.required(0), "<") < 0;
}
bool t_le(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("le", args, {"other"});
  return compare(v, a.required(0), "<=") <= 0;
}
bool t_gt(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("gt", args, {"other"});
  return compare(v, a.required(0), ">") > 0;
}
bool t_ge(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("ge", args, {"other"});
  return compare(v, a.required(0), ">=") >= 0;
}

bool t_in(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("in", args, {"seq"});
  return contains(a.required(0), v);
}

// `x is sameas y`: Python identity. Scalars compare by value (CPython interns None/True/False and small
// ints; Loom treats every equal scalar as identical), containers by object identity.
bool t_sameas(Interpreter&, const Value& v, CallArgs& args) {
  ArgBinder a("sameas", args, {"other"});
  const Value& o = a.required(0);
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case ValueKind::kNone: return true;
    case ValueKind::kBool:
    case ValueKind::kInt: return v.as_int() == o.as_int();
    case ValueKind::kFloat: return v.as_double() == o.as_double();
    default: return v.identity() == o.identity();
  }
}

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  no_args("filter", a);
  return v.is_string() && find_filter(v.as_string()) != nullptr;
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  no_args("test", a);
  return v.is_string() && find_test(v.as_string()) != nullptr;
}

struct TestEntry {
  std::string_view name;
  TestFn fn;
};

constexpr TestEntry kTests[] = {
    {"boolean", t_boolean},
    {"callable", t_callable},
    {"defined", t_defined},
    {"divisibleby", t_divisibleby},
    {"eq", t_eq},
    {"==", t_eq},
    {"equalto", t_eq},
    {"escaped", t_escaped},
    {"even", t_even},
    {"false", t_false},
    {"filter", t_filter},
    {"float", t_float},
    {"ge", t_ge},
    {">=", t_ge},
    {"gt", t_gt},
    {">", t_gt},
    {"greaterthan", t_gt},
    {"in", t_in},
    {"integer", t_integer},
    {"iterable", t_iterable},
    {"le", t_le},
    {"<=", t_le},
    {"lower", t_lower},
    {"lt", t_lt},
    {"<", t_lt},
    {"lessthan", t_lt},
    {"mapping", t_mapping},
    {"ne", t_ne},
    {"!=", t_ne},
    {"none", t_none},
    {"number", t_number},
    {"odd", t_odd},
    {"sameas", t_sameas},
    {"sequence", t_sequence},
    {"string", t_string},
    {"test", t_test},
    {"true", t_true},
    {"undefined", t_undefined},
    {"upper", t_upper},
};

}  // namespace

TestFn find_test(std::string_view name) {
  for (const auto& t : kTests) {
    if (t.name == name) return t.fn;
  }
  return nullptr;
}

}  // namespace loom::text::jinja
