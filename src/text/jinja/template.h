// Public entry point of the Jinja subset interpreter: parse once, render many times.
//
//   LOOM_ASSIGN_OR_RETURN(auto tmpl, jinja::Template::parse(source));
//   jinja::RenderVars vars{{"messages", jinja::Value::from_json(messages)}};
//   LOOM_ASSIGN_OR_RETURN(std::string text, tmpl.render(vars));
//
// Semantics are those of transformers' chat-template environment (jinja2 ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks and loopcontrols, transformers' tojson, raise_exception and
// strftime_now). A parsed Template is immutable and can render from several threads at once.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"
#include "text/jinja/interpreter.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {

struct TemplateNode;

class Template {
 public:
  // Syntax errors -> InvalidArgument "template syntax error at line L, column C: ...".
  static core::Expected<Template> parse(std::string_view source);

  // Runtime errors -> InvalidArgument "template error at line L: <message>" (for raise_exception the
  // message is the template's own); safety limits -> ResourceExhausted.
  core::Expected<std::string> render(const RenderVars& vars, const RenderOptions& options = {}) const;

 private:
  std::shared_ptr<const TemplateNode> root_;
};

}  // namespace loom::text::jinja
