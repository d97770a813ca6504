// Registries of jinja2's built-in filters, tests, globals and the Python methods templates call on
// strings, lists and dicts. Implementations live in filters.cpp, tests_builtin.cpp, globals.cpp and
// methods.cpp.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {

FilterFn find_filter(std::string_view name);  // nullptr if unknown
TestFn find_test(std::string_view name);      // nullptr if unknown

// Globals of transformers' environment: range, dict, namespace, raise_exception, strftime_now (plus
// jinja2's cycler and joiner). Returns false for unknown names.
bool find_global(std::string_view name, Value* out);

// Python attribute lookup on built-in values (str/list/tuple/dict methods). Sets *out to a bound
// method and returns true when `name` is an attribute of the Python type; mutating methods
// (list.append, dict.update, ...) come back as sandbox-unsafe Undefined values, as in
// ImmutableSandboxedEnvironment.
bool find_method(const Value& self, std::string_view name, Value* out);

// Python-style argument binding for built-in callables: positional arguments first, then keywords by
// name; too many arguments or unknown keywords raise TypeError naming the function.
class ArgBinder {
 public:
  ArgBinder(std::string_view function, const CallArgs& args, std::initializer_list<std::string_view> params);
  bool has(size_t i) const { return bound_[i] != nullptr; }
  const Value& get(size_t i) const;  // requires has(i)
  Value get_or(size_t i, Value fallback) const { return has(i) ? get(i) : fallback; }
  // Requires the argument; TypeError "missing required argument" otherwise.
  const Value& required(size_t i) const;

 private:
  std::string function_;
  std::vector<std::string> names_;
  std::vector<const Value*> bound_;
};

// Conversions used by built-ins, with Python's TypeErrors.
int64_t to_index(const Value& v, std::string_view what);     // int or bool
std::string str_arg(const Value& v, std::string_view what);  // str only
// Python's clamping of optional start/end indices (None or int) against a length n.
void clamp_range(int64_t n, const Value* start, const Value* end, int64_t* s, int64_t* e);
// A Python bound method / builtin function object.
Value make_builtin(std::string name, Value (*fn)(Interpreter&, const Value& self, CallArgs& args),
                   Value self);

}  // namespace loom::text::jinja
