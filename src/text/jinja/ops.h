// Python operators and jinja2's sandboxed attribute/item access on Values.
#pragma once

#include <string_view>
#include <vector>

#include "text/jinja/ast.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {

// Safety cap for strings and lists built by * and + (a template could otherwise ask for gigabytes).
constexpr size_t kMaxBuiltSize = size_t{64} << 20;

// + - * / // % ** with Python semantics (int overflow beyond 64 bits is an error here).
Value binary_op(BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);

// `item in container`.
bool contains(const Value& container, const Value& item);

// jinja2 SandboxedEnvironment.getattr: Python attribute first (methods of str/list/dict, attributes of
// interpreter objects), then item lookup; Undefined when neither exists. Underscore/dunder attributes
// and mutating methods come back as sandbox-unsafe Undefined values.
Value get_attribute(const Value& obj, std::string_view name);
// jinja2 SandboxedEnvironment.getitem: item lookup first, then (for str keys) attribute lookup.
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; each bound may be None.
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Python iterable unpacking into n targets (TypeError/ValueError like Python).
std::vector<Value> unpack(const Value& v, size_t n);

// Markup escaping (markupsafe.escape) of str(v); Markup values are returned unchanged.
Value escape_markup(const Value& v);

}  // namespace loom::text::jinja
