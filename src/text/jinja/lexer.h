// Template source -> tokens, reproducing jinja2's lexer (jinja2/lexer.py) for the environment
// transformers uses: default delimiters, trim_blocks=True, lstrip_blocks=True, no line statements,
// keep_trailing_newline=False.
//
// Whitespace rules implemented here (they decide the exact bytes of the output):
//  - source newlines (\r\n, \r) become \n and one trailing newline is dropped;
//  - "{%-", "{{-", "{#-" strip all whitespace (str.isspace) before the tag, "-%}", "-}}", "-#}" all
//    whitespace after it;
//  - trim_blocks: a single "\n" right after "%}" or "#}" is removed ("+%}" keeps it);
//  - lstrip_blocks: spaces/tabs between the start of a line and "{%" / "{#" are removed ("{%+" keeps
//    them), but only when nothing else precedes the tag on that line.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::text::jinja {

enum class TokenType {
  kData,           // literal template text (value)
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,           // identifier (value)
  kString,         // string literal, escapes decoded (value)
  kInteger,        // int_value
  kFloat,          // float_value
  kOperator,       // value: "+", "//", "==", "(", ...
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;    // 1-based
  int column = 1;  // 1-based, in code points
};

// Throws TemplateError(kSyntax) with line and column on malformed input.
std::vector<Token> tokenize(std::string_view source);

// Human-readable token description for error messages ("end of print statement", "'foo'", ...).
std::string describe_token(const Token& token);

}  // namespace loom::text::jinja
