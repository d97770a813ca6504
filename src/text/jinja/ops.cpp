#include "text/jinja/ops.h"

#include <cmath>
#include <limits>

#include "text/jinja/builtins.h"
#include "text/jinja/error.h"
#include "text/jinja/pyformat.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

[[noreturn]] void overflow() {
  throw_type_error("integer overflow: Loom's templates use 64-bit integers");
}

[[noreturn]] void unsupported(const char* op, const Value& a, const Value& b) {
  throw_type_error(std::string("unsupported operand type(s) for ") + op + ": '" + a.type_name() + "' and '" +
                   b.type_name() + "'");
}

int64_t checked_add(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checked_sub(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) overflow();
  return r;
}
int64_t checked_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow();
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw_type_error("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) throw_type_error("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

// CPython float_divmod.
void float_divmod(double vx, double wx, double* div_out, double* mod_out) {
  if (wx == 0.0) throw_type_error("float divmod()");
  double mod = std::fmod(vx, wx);
  double div = (vx - mod) / wx;
  if (mod != 0.0) {
    if ((wx < 0) != (mod < 0)) {
      mod += wx;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, wx);
  }
  double floordiv;
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, vx / wx);
  }
  *div_out = floordiv;
  *mod_out = mod;
}

Value repeat_sequence(const Value& seq, int64_t n) {
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    if (n <= 0 || s.empty()) return seq.is_markup() ? Value::markup("") : Value::string("");
    if (s.size() * static_cast<size_t>(n) > kMaxBuiltSize) throw_error(ErrorKind::kLimit, "string too large");
    std::string out;
    out.reserve(s.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out += s;
    return seq.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  const auto& items = seq.items();
  std::vector<Value> out;
  if (n > 0 && !items.empty()) {
    if (items.size() * static_cast<size_t>(n) > kMaxBuiltSize / 16)
      throw_error(ErrorKind::kLimit, "list too large");
    out.reserve(items.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  }
  return seq.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

bool is_plain_seq(const Value& v) {
  return v.is_list() && (v.seq_kind() == SeqKind::kList || v.seq_kind() == SeqKind::kTuple);
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  int64_t b = base;
  while (exp > 0) {
    if (exp & 1) result = checked_mul(result, b);
    exp >>= 1;
    if (exp > 0) b = checked_mul(b, b);
  }
  return Value::integer(result);
}

std::string escape_html(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

// Python slice index normalisation (PySlice_AdjustIndices) for a sequence of length n.
void adjust_slice(int64_t n, const Value& start_v, const Value& stop_v, const Value& step_v, int64_t* start,
                  int64_t* stop, int64_t* step) {
  auto as_bound = [](const Value& v, int64_t fallback) -> std::pair<bool, int64_t> {
    if (v.is_none()) return {false, fallback};
    return {true, v.as_int()};
  };
  *step = step_v.is_none() ? 1 : step_v.as_int();
  if (*step == 0) throw_type_error("slice step cannot be zero");
  auto [has_start, s] = as_bound(start_v, 0);
  auto [has_stop, e] = as_bound(stop_v, 0);
  if (*step > 0) {
    if (!has_start) s = 0;
    if (!has_stop) e = n;
  } else {
    if (!has_start) s = n - 1;
    if (!has_stop) e = -1 - n;  // becomes -1 after the adjustment below
  }
  auto clamp = [&](int64_t i, bool for_stop) {
    (void)for_stop;
    if (i < 0) {
      i += n;
      if (i < 0) i = *step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = *step < 0 ? n - 1 : n;
    }
    return i;
  };
  *start = clamp(s, false);
  *stop = clamp(e, true);
}

}  // namespace

Value escape_markup(const Value& v) {
  if (v.is_markup()) return v;
  return Value::markup(escape_html(to_str(v)));
}

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) a.fail_undefined();
  if (b.is_undefined() && !(op == BinaryOp::kMod && a.is_string())) b.fail_undefined();
  switch (op) {
    case BinaryOp::kAdd:
      if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return Value::number(a.as_double() + b.as_double());
        return Value::integer(checked_add(a.as_int(), b.as_int()));
      }
      if (a.is_string() && b.is_string()) {
        if (a.is_markup() || b.is_markup()) {
          std::string left = a.is_markup() ? a.as_string() : escape_markup(a).as_string();
          std::string right = b.is_markup() ? b.as_string() : escape_markup(b).as_string();
          return Value::markup(left + right);
        }
        if (a.as_string().size() + b.as_string().size() > kMaxBuiltSize) {
          throw_error(ErrorKind::kLimit, "string too large");
        }
        return Value::string(a.as_string() + b.as_string());
      }
      if (is_plain_seq(a) && is_plain_seq(b) && a.seq_kind() == b.seq_kind()) {
        std::vector<Value> out = a.items();
        out.insert(out.end(), b.items().begin(), b.items().end());
        return a.is_tuple() ? Value::tuple(std::move(out)) : Value::list(std::move(out));
      }
      if (a.is_string()) {
        throw_type_error("can only concatenate str (not \"" + b.type_name() + "\") to str");
      }
      if (is_plain_seq(a)) {
        throw_type_error("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " +
                         a.type_name());
      }
      unsupported("+", a, b);
    case BinaryOp::kSub:
      if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return Value::number(a.as_double() - b.as_double());
        return Value::integer(checked_sub(a.as_int(), b.as_int()));
      }
      unsupported("-", a, b);
    case BinaryOp::kMul:
      if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) return Value::number(a.as_double() * b.as_double());
        return Value::integer(checked_mul(a.as_int(), b.as_int()));
      }
      if ((a.is_string() || is_plain_seq(a)) && b.is_integral()) return repeat_sequence(a, b.as_int());
      if (a.is_integral() && (b.is_string() || is_plain_seq(b))) return repeat_sequence(b, a.as_int());
      if (a.is_string() || b.is_string() || is_plain_seq(a) || is_plain_seq(b)) {
        const Value& other = (a.is_string() || is_plain_seq(a)) ? b : a;
        throw_type_error("can't multiply sequence by non-int of type '" + other.type_name() + "'");
      }
      unsupported("*", a, b);
    case BinaryOp::kDiv:
      if (a.is_number() && b.is_number()) {
        if (b.as_double() == 0.0) throw_type_error("division by zero");
        return Value::number(a.as_double() / b.as_double());
      }
      unsupported("/", a, b);
    case BinaryOp::kFloorDiv:
      if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) {
          if (b.as_double() == 0.0) throw_type_error("float floor division by zero");
          double div, mod;
          float_divmod(a.as_double(), b.as_double(), &div, &mod);
          return Value::number(div);
        }
        return Value::integer(floor_div(a.as_int(), b.as_int()));
      }
      unsupported("//", a, b);
    case BinaryOp::kMod:
      if (a.is_string()) {
        std::string s = percent_format(a.as_string(), b);
        return a.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
      }
      if (a.is_number() && b.is_number()) {
        if (a.is_float() || b.is_float()) {
          if (b.as_double() == 0.0) throw_type_error("float modulo");
          double div, mod;
          float_divmod(a.as_double(), b.as_double(), &div, &mod);
          return Value::number(mod);
        }
        return Value::integer(floor_mod(a.as_int(), b.as_int()));
      }
      unsupported("%", a, b);
    case BinaryOp::kPow:
      if (a.is_number() && b.is_number()) {
        if (a.is_integral() && b.is_integral()) {
          if (b.as_int() >= 0) return int_pow(a.as_int(), b.as_int());
          if (a.as_int() == 0) throw_type_error("0.0 cannot be raised to a negative power");
          return Value::number(std::pow(a.as_double(), b.as_double()));
        }
        double x = a.as_double(), y = b.as_double();
        if (x == 0.0 && y < 0) throw_type_error("0.0 cannot be raised to a negative power");
        if (x < 0 && y != std::floor(y)) {
          throw_type_error(
              "negative number raised to a fractional power (complex results are not supported)");
        }
        return Value::number(std::pow(x, y));
      }
      unsupported("** or pow()", a, b);
    case BinaryOp::kAnd:
    case BinaryOp::kOr: break;
  }
  throw_type_error("invalid binary operator");
}

Value negate(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_float()) return Value::number(-v.as_double());
  if (v.is_integral()) return Value::integer(checked_sub(0, v.as_int()));
  throw_type_error("bad operand type for unary -: '" + v.type_name() + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) v.fail_undefined();
  if (v.is_float()) return v;
  if (v.is_integral()) return Value::integer(v.as_int());
  throw_type_error("bad operand type for unary +: '" + v.type_name() + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case ValueKind::kUndefined: return false;
    case ValueKind::kString:
      if (!item.is_string()) {
        throw_type_error("'in <string>' requires string as left operand, not " + item.type_name());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case ValueKind::kList:
      for (const Value& e : container.items()) {
        if (equals(e, item)) return true;
      }
      return false;
    case ValueKind::kDict: return container.as_dict().find(item) != nullptr;
    case ValueKind::kIterator: {
      IteratorData& it = container.as_iterator();
      while (it.pos < it.items.size()) {
        if (equals(it.items[it.pos++], item)) return true;
      }
      return false;
    }
    default: break;
  }
  throw_type_error("argument of type '" + container.type_name() + "' is not iterable");
}

namespace {

bool is_dunder(std::string_view name) {
  return name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
}

}  // namespace

Value get_attribute(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) obj.fail_undefined();
  if (is_dunder(name)) return Value::unsafe_attr(obj, name);
  Value out;
  if (obj.is_object()) {
    if (obj.as_object().get_attr(obj, name, &out)) {
      if (!name.empty() && name[0] == '_') return Value::unsafe_attr(obj, name);
      return out;
    }
    return Value::undefined_attr(obj, name);
  }
  if (find_method(obj, name, &out)) return out;
  if (obj.is_dict()) {
    if (const Value* v = obj.as_dict().find(Value::string(std::string(name)))) return *v;
  }
  return Value::undefined_attr(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) obj.fail_undefined();
  switch (obj.kind()) {
    case ValueKind::kDict: {
      if (is_hashable(key)) {
        if (const Value* v = obj.as_dict().find(key)) return *v;
      }
      break;
    }
    case ValueKind::kList:
    case ValueKind::kString:
      if (key.is_integral()) {
        int64_t n = length(obj);
        int64_t i = key.as_int();
        if (i < 0) i += n;
        if (i < 0 || i >= n) return Value::undefined_item(obj, key);
        if (obj.is_list()) return obj.items()[static_cast<size_t>(i)];
        const std::string& s = obj.as_string();
        if (unicode::is_ascii(s)) return Value::string(s.substr(static_cast<size_t>(i), 1));
        std::u32string u = unicode::to_u32(s);
        return Value::string(unicode::to_utf8(std::u32string_view(u).substr(static_cast<size_t>(i), 1)));
      }
      break;
    default: break;
  }
  if (key.is_string()) {
    const std::string& name = key.as_string();
    if (is_dunder(name)) return Value::unsafe_attr(obj, name);
    Value out;
    if (obj.is_object()) {
      if (obj.as_object().get_attr(obj, name, &out)) {
        if (!name.empty() && name[0] == '_') return Value::unsafe_attr(obj, name);
        return out;
      }
    } else if (find_method(obj, name, &out)) {
      return out;
    }
  }
  return Value::undefined_item(obj, key);
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  // jinja2 compiles obj[a:b] to a plain Python subscription (slices bypass environment.getitem), so
  // every failure is an error, not Undefined.
  if (obj.is_undefined()) obj.fail_undefined();
  if (obj.is_dict()) throw_type_error("unhashable type: 'slice'");
  if (!obj.is_string() &&
      !(obj.is_list() && (obj.seq_kind() == SeqKind::kList || obj.seq_kind() == SeqKind::kTuple ||
                          obj.seq_kind() == SeqKind::kRange))) {
    throw_type_error("'" + obj.type_name() + "' object is not subscriptable");
  }
  for (const Value* b : {&start, &stop, &step}) {
    if (!b->is_none() && !b->is_integral()) {
      throw_type_error("slice indices must be integers or None or have an __index__ method");
    }
  }
  if (obj.is_string() && unicode::is_ascii(obj.as_string()) && (step.is_none() || step.as_int() == 1)) {
    const std::string& s = obj.as_string();
    int64_t b, e, st;
    adjust_slice(static_cast<int64_t>(s.size()), start, stop, step, &b, &e, &st);
    std::string out = e > b ? s.substr(static_cast<size_t>(b), static_cast<size_t>(e - b)) : std::string();
    return obj.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  if (obj.is_string()) {
    std::u32string u = unicode::to_u32(obj.as_string());
    int64_t b, e, st;
    adjust_slice(static_cast<int64_t>(u.size()), start, stop, step, &b, &e, &st);
    std::u32string out;
    if (st > 0) {
      for (int64_t i = b; i < e; i += st) out.push_back(u[static_cast<size_t>(i)]);
    } else {
      for (int64_t i = b; i > e; i += st) out.push_back(u[static_cast<size_t>(i)]);
    }
    std::string s = unicode::to_utf8(out);
    return obj.is_markup() ? Value::markup(std::move(s)) : Value::string(std::move(s));
  }
  const auto& items = obj.items();
  int64_t b, e, st;
  adjust_slice(static_cast<int64_t>(items.size()), start, stop, step, &b, &e, &st);
  std::vector<Value> out;
  if (st > 0) {
    for (int64_t i = b; i < e; i += st) out.push_back(items[static_cast<size_t>(i)]);
  } else {
    for (int64_t i = b; i > e; i += st) out.push_back(items[static_cast<size_t>(i)]);
  }
  if (obj.is_tuple()) return Value::tuple(std::move(out));
  if (obj.seq_kind() == SeqKind::kRange) {
    // range[i:j:k] is a range again: range(start + i*step, start + j*step, step*k).
    const ListData& r = obj.as_list();
    auto d = std::make_shared<ListData>();
    d->seq = SeqKind::kRange;
    d->range_start = r.range_start + b * r.range_step;
    d->range_stop = r.range_start + e * r.range_step;
    d->range_step = r.range_step * st;
    d->items = std::move(out);
    return Value::sequence(std::move(d));
  }
  return Value::list(std::move(out));
}

std::vector<Value> unpack(const Value& v, size_t n) {
  if (v.is_undefined()) {
    if (n == 0) return {};
    throw_type_error("not enough values to unpack (expected " + std::to_string(n) + ", got 0)");
  }
  if (!is_iterable(v)) throw_type_error("cannot unpack non-iterable " + v.type_name() + " object");
  std::vector<Value> items = iterate(v);
  if (items.size() > n) throw_type_error("too many values to unpack (expected " + std::to_string(n) + ")");
  if (items.size() < n) {
    throw_type_error("not enough values to unpack (expected " + std::to_string(n) + ", got " +
                     std::to_string(items.size()) + ")");
  }
  return items;
}

}  // namespace loom::text::jinja
