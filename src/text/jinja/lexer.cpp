#include "text/jinja/lexer.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "text/jinja/error.h"
#include "text/jinja/unicode.h"

namespace loom::text::jinja {
namespace {

// Operators, longest first so that "//" wins over "/" and "**" over "*".
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                           "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                           "<",  ">",  "=",  ".",  ":",  "|",  ",", ";"};

bool is_name_start(unsigned char c) {
  return c == '_' || std::isalpha(c) || c >= 0x80;
}
bool is_name_char(unsigned char c) {
  return c == '_' || std::isalnum(c) || c >= 0x80;
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::string normalize_source(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    char c = source[i];
    if (c == '\r') {
      out.push_back('\n');
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out.push_back(c);
    }
  }
  // keep_trailing_newline=False: exactly one trailing newline is removed.
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's str.rstrip() (Unicode whitespace).
std::string_view rstrip_space(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    // Walk back to the start of the last code point.
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80 && end - start < 4) --start;
    size_t pos = start;
    char32_t cp = unicode::decode(s, &pos);
    if (pos != end || !unicode::is_space(cp)) break;
    end = start;
  }
  return s.substr(0, end);
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_source(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> run() {
    size_t pos = 0;
    bool line_starting = true;  // did the previous match end with a newline? (lstrip_blocks)
    while (pos < src_.size()) {
      size_t tag = find_tag_start(pos);
      if (tag == std::string_view::npos) {
        emit_data(pos, std::string_view(src_).substr(pos));
        break;
      }
      std::string_view text = std::string_view(src_).substr(pos, tag - pos);
      char kind = src_[tag + 1];
      char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+') ? src_[tag + 2] : 0;

      size_t raw_body = 0;
      bool raw = kind == '%' && match_raw_begin(tag, &raw_body);
      text = apply_lstrip(text, sign, kind != '{', line_starting);
      emit_data(pos, text);
      if (raw) {
        pos = lex_raw(tag, raw_body, &line_starting);
        continue;
      }
      size_t body = tag + 2 + (sign != 0 ? 1 : 0);
      if (kind == '#') {
        pos = lex_comment(tag, body, &line_starting);
      } else {
        pos = lex_tag(tag, body, kind == '%', &line_starting);
      }
    }
    Token eof;
    eof.type = TokenType::kEof;
    set_location(eof, src_.size());
    tokens_.push_back(std::move(eof));
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t pos, std::string message) const {
    Token t;
    set_location(t, pos);
    throw TemplateError(ErrorKind::kSyntax, std::move(message), t.line, t.column);
  }

  void set_location(Token& t, size_t pos) const {
    auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), pos);
    size_t line_index = static_cast<size_t>(it - line_starts_.begin()) - 1;
    size_t start = line_starts_[line_index];
    t.line = static_cast<int>(line_index) + 1;
    t.column = static_cast<int>(unicode::length(std::string_view(src_).substr(start, pos - start))) + 1;
  }

  size_t find_tag_start(size_t pos) const {
    while (true) {
      size_t i = src_.find('{', pos);
      if (i == std::string::npos || i + 1 >= src_.size()) return std::string_view::npos;
      char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
      pos = i + 1;
    }
  }

  // jinja2's OptionalLStrip: "-" strips all whitespace before the tag; otherwise lstrip_blocks removes
  // spaces/tabs back to the line start for block and comment tags.
  std::string_view apply_lstrip(std::string_view text, char sign, bool is_block_or_comment,
                                bool line_starting) {
    if (sign == '-') return rstrip_space(text);
    if (sign == '+' || !is_block_or_comment) return text;
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string_view::npos ? 0 : nl + 1;
    if (l_pos > 0 || line_starting) {
      bool only_blank = std::all_of(text.begin() + static_cast<std::ptrdiff_t>(l_pos), text.end(),
                                    [](char c) { return c == ' ' || c == '\t'; });
      if (only_blank) return text.substr(0, l_pos);
    }
    return text;
  }

  void emit_data(size_t pos, std::string_view text) {
    if (text.empty()) return;
    Token t;
    t.type = TokenType::kData;
    t.value = std::string(text);
    set_location(t, pos);
    tokens_.push_back(std::move(t));
  }

  size_t skip_space(size_t pos) const {
    while (pos < src_.size()) {
      size_t next = pos;
      char32_t cp = unicode::decode(src_, &next);
      if (!unicode::is_space(cp)) break;
      pos = next;
    }
    return pos;
  }

  // Matches "{%[-+]?\s*raw\s*(-%}\s*|%})" at tag; *after receives the position after it.
  bool match_raw_begin(size_t tag, size_t* after) const {
    size_t p = tag + 2;
    if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ++p;
    p = skip_space(p);
    if (src_.compare(p, 3, "raw") != 0) return false;
    p = skip_space(p + 3);
    if (src_.compare(p, 3, "-%}") == 0) {
      *after = skip_space(p + 3);
      return true;
    }
    if (src_.compare(p, 2, "%}") == 0) {
      *after = p + 2;  // no trim_blocks newline removal after {% raw %} (jinja2 quirk)
      return true;
    }
    return false;
  }

  size_t lex_raw(size_t tag, size_t body, bool* line_starting) {
    // A raw-begin match ends with "\n" only when "-%}" swallowed whitespace ending in one.
    *line_starting = body > tag && src_[body - 1] == '\n';
    // Find "{%[-+]?\s*endraw\s*(+%}|-%}\s*|%}\n?)".
    size_t search = body;
    while (true) {
      size_t i = src_.find("{%", search);
      if (i == std::string::npos) fail(tag, "Missing end of raw directive");
      size_t p = i + 2;
      char sign = 0;
      if (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) sign = src_[p++];
      p = skip_space(p);
      if (src_.compare(p, 6, "endraw") != 0) {
        search = i + 1;
        continue;
      }
      p = skip_space(p + 6);
      size_t end;
      if (src_.compare(p, 3, "+%}") == 0) {
        end = p + 3;
      } else if (src_.compare(p, 3, "-%}") == 0) {
        end = skip_space(p + 3);
      } else if (src_.compare(p, 2, "%}") == 0) {
        end = p + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;
      } else {
        search = i + 1;
        continue;
      }
      std::string_view text = std::string_view(src_).substr(body, i - body);
      text = apply_lstrip(text, sign, true, *line_starting);
      emit_data(body, text);
      *line_starting = end > 0 && src_[end - 1] == '\n' && end > p;
      return end;
    }
  }

  size_t lex_comment(size_t tag, size_t body, bool* line_starting) {
    size_t j = src_.find("#}", body);
    if (j == std::string::npos) fail(tag, "Missing end of comment tag");
    char sign = (j > body && (src_[j - 1] == '-' || src_[j - 1] == '+')) ? src_[j - 1] : 0;
    size_t end = j + 2;
    if (sign == '-') {
      end = skip_space(end);
    } else if (sign == 0 && end < src_.size() && src_[end] == '\n') {
      ++end;  // trim_blocks
    }
    *line_starting = end > j + 2 && src_[end - 1] == '\n';
    return end;
  }

  // Lexes the inside of {{ ... }} or {% ... %}; returns the position after the closing delimiter.
  size_t lex_tag(size_t tag, size_t body, bool block, bool* line_starting) {
    Token begin;
    begin.type = block ? TokenType::kBlockBegin : TokenType::kVariableBegin;
    set_location(begin, tag);
    tokens_.push_back(std::move(begin));
    std::vector<char> balance;  // expected closing brackets; delimiters only end the tag when empty
    size_t pos = body;
    while (true) {
      if (pos >= src_.size()) return pos;  // unterminated tag: the parser reports the missing end
      if (balance.empty()) {
        size_t end = match_tag_end(pos, block);
        if (end != std::string::npos) {
          Token t;
          t.type = block ? TokenType::kBlockEnd : TokenType::kVariableEnd;
          set_location(t, pos);
          tokens_.push_back(std::move(t));
          size_t delim_end = pos + 2 + (src_[pos] == '-' || src_[pos] == '+' ? 1 : 0);
          *line_starting = end > delim_end && src_[end - 1] == '\n';
          return end;
        }
      }
      size_t next = pos;
      char32_t cp = unicode::decode(src_, &next);
      if (unicode::is_space(cp)) {
        pos = next;
        continue;
      }
      pos = lex_token(pos, &balance);
    }
  }

  // Returns the position after the tag end starting at pos, or npos.
  size_t match_tag_end(size_t pos, bool block) const {
    if (block) {
      if (src_.compare(pos, 3, "+%}") == 0) return pos + 3;
      if (src_.compare(pos, 3, "-%}") == 0) return skip_space(pos + 3);
      if (src_.compare(pos, 2, "%}") == 0) {
        size_t end = pos + 2;
        if (end < src_.size() && src_[end] == '\n') ++end;  // trim_blocks
        return end;
      }
      return std::string::npos;
    }
    if (src_.compare(pos, 3, "-}}") == 0) return skip_space(pos + 3);
    if (src_.compare(pos, 2, "}}") == 0) return pos + 2;
    return std::string::npos;
  }

  size_t lex_token(size_t pos, std::vector<char>* balance) {
    Token t;
    set_location(t, pos);
    size_t end;
    if ((end = match_float(pos)) != std::string::npos) {
      t.type = TokenType::kFloat;
      std::string digits;
      for (size_t i = pos; i < end; ++i) {
        if (src_[i] != '_') digits.push_back(src_[i]);
      }
      t.float_value = std::strtod(digits.c_str(), nullptr);
      t.value = src_.substr(pos, end - pos);
    } else if ((end = match_integer(pos, &t.int_value)) != std::string::npos) {
      t.type = TokenType::kInteger;
      t.value = src_.substr(pos, end - pos);
    } else if (is_name_start(static_cast<unsigned char>(src_[pos]))) {
      end = pos + 1;
      while (end < src_.size() && is_name_char(static_cast<unsigned char>(src_[end]))) ++end;
      t.type = TokenType::kName;
      t.value = src_.substr(pos, end - pos);
    } else if (src_[pos] == '\'' || src_[pos] == '"') {
      end = match_string(pos);
      if (end == std::string::npos)
        fail(pos, std::string("unexpected char ") + quote_char(pos) + " at " + std::to_string(pos));
      t.type = TokenType::kString;
      t.value = decode_string_literal(pos, std::string_view(src_).substr(pos + 1, end - pos - 2));
    } else {
      std::string_view op;
      for (std::string_view candidate : kOperators) {
        if (src_.compare(pos, candidate.size(), candidate) == 0) {
          op = candidate;
          break;
        }
      }
      if (op.empty()) fail(pos, "unexpected char " + quote_char(pos) + " at " + std::to_string(pos));
      if (op == "{" || op == "(" || op == "[") {
        balance->push_back(op == "{" ? '}' : (op == "(" ? ')' : ']'));
      } else if (op == "}" || op == ")" || op == "]") {
        if (balance->empty()) fail(pos, "unexpected '" + std::string(op) + "'");
        char expected = balance->back();
        balance->pop_back();
        if (expected != op[0]) {
          fail(pos, "unexpected '" + std::string(op) + "', expected '" + std::string(1, expected) + "'");
        }
      }
      t.type = TokenType::kOperator;
      t.value = std::string(op);
      end = pos + op.size();
    }
    tokens_.push_back(std::move(t));
    return end;
  }

  std::string quote_char(size_t pos) const {
    size_t next = pos;
    char32_t cp = unicode::decode(src_, &next);
    std::string s;
    unicode::append(s, cp);
    return cp == '\'' ? "\"'\"" : "'" + s + "'";
  }

  // (\d+_)*\d+ starting at pos; returns end or npos.
  size_t match_digits(size_t pos) const {
    if (pos >= src_.size() || !is_digit(src_[pos])) return std::string::npos;
    size_t p = pos;
    while (true) {
      while (p < src_.size() && is_digit(src_[p])) ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && is_digit(src_[p + 1])) {
        ++p;
        continue;
      }
      return p;
    }
  }

  // jinja2 float_re: (?<!\.)(\d+_)*\d+((\.(\d+_)*\d+)?e[+\-]?(\d+_)*\d+|\.(\d+_)*\d+)
  size_t match_float(size_t pos) const {
    if (pos > 0 && src_[pos - 1] == '.') return std::string::npos;
    size_t p = match_digits(pos);
    if (p == std::string::npos) return p;
    size_t frac_end = std::string::npos;
    if (p < src_.size() && src_[p] == '.') frac_end = match_digits(p + 1);
    size_t q = frac_end != std::string::npos ? frac_end : p;
    if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < src_.size() && (src_[r] == '+' || src_[r] == '-')) ++r;
      size_t exp_end = match_digits(r);
      if (exp_end != std::string::npos) return exp_end;
    }
    return frac_end;
  }

  // jinja2 integer_re: 0b(_?[01])+ | 0o(_?[0-7])+ | 0x(_?[0-9a-f])+ | [1-9](_?\d)* | 0(_?0)*
  size_t match_integer(size_t pos, int64_t* value) const {
    auto digit_value = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return 99;
    };
    auto scan = [&](size_t p, int base, bool need_first) -> size_t {
      // (_?d)+ for prefixed forms, (_?d)* after the first digit for decimal.
      size_t q = p;
      bool any = false;
      while (q < src_.size()) {
        size_t r = q;
        if (src_[r] == '_') ++r;
        if (r < src_.size() && digit_value(src_[r]) < base) {
          q = r + 1;
          any = true;
        } else {
          break;
        }
      }
      return (need_first && !any) ? std::string::npos : q;
    };
    size_t end = std::string::npos;
    int base = 10;
    size_t digits_start = pos;
    char c = src_[pos];
    if (c == '0' && pos + 1 < src_.size()) {
      char p = static_cast<char>(src_[pos + 1] | 0x20);
      if (p == 'b' || p == 'o' || p == 'x') {
        base = p == 'b' ? 2 : (p == 'o' ? 8 : 16);
        end = scan(pos + 2, base, true);
        digits_start = pos + 2;
      }
    }
    if (end == std::string::npos) {
      base = 10;
      digits_start = pos;
      if (c >= '1' && c <= '9') {
        end = scan(pos + 1, 10, false);
      } else if (c == '0') {
        end = pos + 1;
        while (end < src_.size()) {  // (_?0)*
          size_t r = end;
          if (src_[r] == '_') ++r;
          if (r < src_.size() && src_[r] == '0') {
            end = r + 1;
          } else {
            break;
          }
        }
      } else {
        return std::string::npos;
      }
    }
    unsigned __int128 v = 0;
    for (size_t i = digits_start; i < end; ++i) {
      if (src_[i] == '_') continue;
      v = v * static_cast<unsigned>(base) + static_cast<unsigned>(digit_value(src_[i]));
      if (v > static_cast<unsigned __int128>(INT64_MAX)) {
        fail(pos, "integer literal too large (Loom's templates use 64-bit integers)");
      }
    }
    *value = static_cast<int64_t>(v);
    return end;
  }

  // A quoted string with backslash escapes; returns the position after the closing quote or npos.
  size_t match_string(size_t pos) const {
    char quote = src_[pos];
    size_t p = pos + 1;
    while (p < src_.size()) {
      if (src_[p] == '\\') {
        p += 2;
        continue;
      }
      if (src_[p] == quote) return p + 1;
      ++p;
    }
    return std::string::npos;
  }

  // value_str.encode("ascii", "backslashreplace").decode("unicode-escape"), as jinja2 does.
  std::string decode_string_literal(size_t pos, std::string_view raw) {
    std::string ascii;
    ascii.reserve(raw.size());
    size_t p = 0;
    while (p < raw.size()) {
      char32_t cp = unicode::decode(raw, &p);
      if (cp < 0x80) {
        ascii.push_back(static_cast<char>(cp));
      } else {
        unicode::append_escaped(ascii, cp);
      }
    }
    std::string out;
    out.reserve(ascii.size());
    auto hex = [&](size_t at, int n, const char* what) -> char32_t {
      char32_t v = 0;
      for (int k = 0; k < n; ++k) {
        char c = at + static_cast<size_t>(k) < ascii.size() ? ascii[at + static_cast<size_t>(k)] : 0;
        int d = std::isxdigit(static_cast<unsigned char>(c))
                    ? (std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (c | 0x20) - 'a' + 10)
                    : -1;
        if (d < 0) fail(pos, std::string("truncated ") + what + " escape");
        v = v * 16 + static_cast<char32_t>(d);
      }
      return v;
    };
    for (size_t i = 0; i < ascii.size(); ++i) {
      char c = ascii[i];
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i + 1 >= ascii.size()) fail(pos, "\\ at end of string");
      char e = ascii[++i];
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'a': out.push_back('\a'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'v': out.push_back('\v'); break;
        case 'x':
          unicode::append(out, hex(i + 1, 2, "\\xXX"));
          i += 2;
          break;
        case 'u':
          unicode::append(out, hex(i + 1, 4, "\\uXXXX"));
          i += 4;
          break;
        case 'U': {
          char32_t cp = hex(i + 1, 8, "\\UXXXXXXXX");
          if (cp > 0x10FFFF) fail(pos, "illegal Unicode character");
          unicode::append(out, cp);
          i += 8;
          break;
        }
        case 'N': fail(pos, "\\N{...} escapes are not supported in Loom's templates");
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i + 1 < ascii.size() && ascii[i + 1] >= '0' && ascii[i + 1] <= '7';
                 ++k) {
              v = v * 8 + static_cast<char32_t>(ascii[++i] - '0');
            }
            unicode::append(out, v);
          } else {
            out.push_back('\\');  // unknown escapes are kept verbatim
            out.push_back(e);
          }
      }
    }
    return out;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

std::string describe_token(const Token& token) {
  switch (token.type) {
    case TokenType::kName: return token.value;
    case TokenType::kOperator: return token.value;
    case TokenType::kData: return "template data / text";
    case TokenType::kVariableBegin: return "begin of print statement";
    case TokenType::kVariableEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kString: return "string";
    case TokenType::kInteger: return "integer";
    case TokenType::kFloat: return "float";
    case TokenType::kEof: return "end of template";
  }
  return "token";
}

}  // namespace loom::text::jinja
