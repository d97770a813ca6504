// Python's json.dumps for template values: transformers replaces jinja2's tojson filter with
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys), so
// this reproduces CPython's encoder byte for byte (separators, indentation, float repr, escapes).
#pragma once

#include <optional>
#include <string>

#include "text/jinja/value.h"

namespace loom::text::jinja {

struct JsonDumpOptions {
  bool ensure_ascii = false;
  std::optional<std::string> indent;          // None = single line
  std::optional<std::string> item_separator;  // default ", " (single line) or "," (indented)
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// Throws TypeError for values json.dumps rejects (Undefined, generators, namespaces, ...).
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace loom::text::jinja
