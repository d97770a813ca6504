// Errors raised while lexing, parsing or rendering a template.
//
// Inside the jinja module errors travel as C++ exceptions (TemplateError): an interpreter that threads
// Expected<> through every expression evaluation would be unreadable. They never leave the module: the
// public entry points (Template::parse / Template::render in template.h) catch them and return a
// core::Status. Kinds mirror the Python exception classes jinja2 would raise, so that messages read the
// same as transformers' errors.
#pragma once

#include <stdexcept>
#include <string>

namespace loom::text::jinja {

enum class ErrorKind {
  kSyntax,     // TemplateSyntaxError / TemplateAssertionError (found while parsing)
  kUndefined,  // UndefinedError: an undefined value was used in a way that needs a value
  kType,       // TypeError / ValueError / ZeroDivisionError / OverflowError / KeyError from Python semantics
  kSecurity,   // SecurityError from the sandbox (mutating methods, underscore attributes)
  kRuntime,    // TemplateRuntimeError, and TemplateError raised by raise_exception()
  kLimit,      // a safety limit of this implementation (recursion depth, output size)
};

const char* error_kind_name(ErrorKind kind);

class TemplateError : public std::runtime_error {
 public:
  TemplateError(ErrorKind kind, std::string message, int line = 0, int column = 0)
      : std::runtime_error(message),
        kind_(kind),
        message_(std::move(message)),
        line_(line),
        column_(column) {}

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  int line() const { return line_; }      // 1-based; 0 = unknown
  int column() const { return column_; }  // 1-based; 0 = unknown (runtime errors carry lines only)
  void set_location(int line, int column = 0) {
    line_ = line;
    column_ = column;
  }

 private:
  ErrorKind kind_;
  std::string message_;
  int line_;
  int column_;
};

[[noreturn]] inline void throw_error(ErrorKind kind, std::string message) {
  throw TemplateError(kind, std::move(message));
}
[[noreturn]] inline void throw_type_error(std::string message) {
  throw TemplateError(ErrorKind::kType, std::move(message));
}

}  // namespace loom::text::jinja
