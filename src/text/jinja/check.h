// Post-parse check pass: binds filter and test names to their implementations and reports the errors
// jinja2's compiler reports at compile time. An unknown filter or test is an error unless it sits in
// an if-statement or conditional expression of the same frame (jinja2 3.x then defers the error to
// the moment the expression runs); break/continue must be inside a loop of the same function.
#pragma once

#include "text/jinja/ast.h"

namespace loom::text::jinja {

// Throws TemplateError(kSyntax) with the offending line.
void check_template(TemplateNode& root);

}  // namespace loom::text::jinja
