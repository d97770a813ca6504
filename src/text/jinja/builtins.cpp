#include "text/jinja/builtins.h"

#include "text/jinja/error.h"
#include "text/jinja/objects.h"

namespace loom::text::jinja {

ArgBinder::ArgBinder(std::string_view function, const CallArgs& args,
                     std::initializer_list<std::string_view> params)
    : function_(function), bound_(params.size(), nullptr) {
  for (auto p : params) names_.emplace_back(p);
  if (args.args.size() > names_.size()) {
    throw_type_error(function_ + "() takes at most " + std::to_string(names_.size()) + " argument(s) (" +
                     std::to_string(args.args.size()) + " given)");
  }
  for (size_t i = 0; i < args.args.size(); ++i) bound_[i] = &args.args[i];
  for (const auto& [key, value] : args.kwargs) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != key) ++i;
    if (i == names_.size())
      throw_type_error(function_ + "() got an unexpected keyword argument " + str_repr(key));
    if (bound_[i] != nullptr)
      throw_type_error(function_ + "() got multiple values for argument " + str_repr(key));
    bound_[i] = &value;
  }
}

const Value& ArgBinder::get(size_t i) const {
  return *bound_[i];
}

const Value& ArgBinder::required(size_t i) const {
  if (bound_[i] == nullptr) {
    throw_type_error(function_ + "() missing required argument " + str_repr(names_[i]));
  }
  return *bound_[i];
}

int64_t to_index(const Value& v, std::string_view what) {
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_integral()) {
    throw_type_error(std::string(what) + ": '" + v.type_name() +
                     "' object cannot be interpreted as an integer");
  }
  return v.as_int();
}

// Python's handling of optional start/end on a code point sequence of length n.
void clamp_range(int64_t n, const Value* start, const Value* end, int64_t* s, int64_t* e) {
  *s = 0;
  *e = n;
  if (start != nullptr && !start->is_none()) *s = to_index(*start, "slice indices");
  if (end != nullptr && !end->is_none()) *e = to_index(*end, "slice indices");
  if (*s < 0) *s = std::max<int64_t>(0, *s + n);
  if (*e < 0) *e = std::max<int64_t>(0, *e + n);
  *s = std::min(*s, n);
  *e = std::min(*e, n);
}

std::string str_arg(const Value& v, std::string_view what) {
  if (v.is_undefined()) v.fail_undefined();
  if (!v.is_string()) throw_type_error(std::string(what) + " must be str, not " + v.type_name());
  return v.as_string();
}

Value make_builtin(std::string name, Value (*fn)(Interpreter&, const Value& self, CallArgs& args),
                   Value self) {
  return Value::object(std::make_shared<BuiltinFunction>(std::move(name), fn, std::move(self)));
}

}  // namespace loom::text::jinja
