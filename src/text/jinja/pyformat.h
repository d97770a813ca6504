// Python string formatting reachable from templates: printf-style `fmt % args` (and the |format
// filter) and str.format() (through jinja2's sandboxed formatter).
#pragma once

#include <string>
#include <string_view>

#include "text/jinja/value.h"

namespace loom::text::jinja {

class Interpreter;

// `fmt % args`: args is a tuple (positional), a dict (for %(name)s) or a single value.
std::string percent_format(std::string_view fmt, const Value& args);

// fmt.format(*args, **kwargs). Field names may use .attr and [index] (resolved with the sandbox's
// getattr/getitem); conversions !s !r !a; format specs [[fill]align][sign][#][0][width][,][.precision][type].
std::string brace_format(std::string_view fmt, const CallArgs& args);

// format(value, spec) for one value (the spec mini-language above).
std::string format_spec(const Value& v, std::string_view spec);

}  // namespace loom::text::jinja
