#include "text/jinja/template.h"

#include "core/check.h"
#include "text/jinja/ast.h"
#include "text/jinja/error.h"
#include "text/jinja/parser.h"

namespace loom::text::jinja {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kSyntax: return "TemplateSyntaxError";
    case ErrorKind::kUndefined: return "UndefinedError";
    case ErrorKind::kType: return "TypeError";
    case ErrorKind::kSecurity: return "SecurityError";
    case ErrorKind::kRuntime: return "TemplateError";
    case ErrorKind::kLimit: return "LimitExceeded";
  }
  return "TemplateError";
}

core::Expected<Template> Template::parse(std::string_view source) {
  try {
    Template t;
    t.root_ = parse_template(source);
    return t;
  } catch (const TemplateError& e) {
    std::string where = "line " + std::to_string(e.line());
    if (e.column() > 0) where += ", column " + std::to_string(e.column());
    return core::invalid_argument("template syntax error at " + where + ": " + e.message());
  }
}

core::Expected<std::string> Template::render(const RenderVars& vars, const RenderOptions& options) const {
  LOOM_CHECK(root_ != nullptr) << "jinja::Template used before parse()";
  try {
    Interpreter interp(*root_, vars, options);
    return interp.render();
  } catch (const TemplateError& e) {
    std::string msg = "template error";
    if (e.line() > 0) msg += " at line " + std::to_string(e.line());
    msg += ": ";
    if (e.kind() != ErrorKind::kRuntime) msg += std::string(error_kind_name(e.kind())) + ": ";
    msg += e.message();
    if (e.kind() == ErrorKind::kLimit) return core::resource_exhausted(msg);
    return core::invalid_argument(msg);
  }
}

}  // namespace loom::text::jinja
