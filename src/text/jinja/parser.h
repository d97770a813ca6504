// Tokens -> syntax tree, following jinja2/parser.py (operator precedence, tuple rules, filter and test
// syntax, statement grammar) with the statements a chat template can use: for (with else, filters,
// recursive), if/elif/else, set (incl. namespace attributes and block set), macro, call, filter, with,
// print, break/continue (loopcontrols) and transformers' generation block.
//
// After parsing, two passes run: symbol analysis (symbols.h) and a check pass that binds filter and test
// names and reports the errors jinja2's compiler reports (unknown filter/test outside conditionals,
// break/continue outside a loop).
#pragma once

#include <memory>
#include <string_view>

#include "text/jinja/ast.h"

namespace loom::text::jinja {

// Throws TemplateError(kSyntax) with line and column.
std::unique_ptr<TemplateNode> parse_template(std::string_view source);

}  // namespace loom::text::jinja
