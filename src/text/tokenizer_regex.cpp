#define PCRE2_CODE_UNIT_WIDTH 8
#include "text/tokenizer_regex.h"

#include <pcre2.h>

#include <cstdio>

#include "core/check.h"
#include "text/tokenizer_unicode.h"
#include "text/tokenizer_unicode_tables.h"

namespace loom::text::detail {

namespace {

// Oniguruma's Unicode `\s`: 0009-000D, 0085 and the Zs/Zl/Zp characters (no U+180E, unlike PCRE2).
constexpr std::string_view kOnigSpace =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}"
    "\\x{3000}";
// Oniguruma's Unicode `\w` (measured against tokenizers 0.23): Alphabetic | Mark | Decimal_Number |
// Connector_Punctuation (no Join_Control). PCRE2's (UCP) is Letter | Number | '_'. Outside a bracket
// class Oniguruma also counts the Latin-1 digits/fractions ¹²³¼½¾ (a quirk of its Latin-1 ctype table).
constexpr std::string_view kOnigWord = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}";
constexpr std::string_view kOnigWordLatin1Extra = "\\x{B2}\\x{B3}\\x{B9}\\x{BC}-\\x{BE}";
// Oniguruma's `\h` is a hexadecimal digit (PCRE2's is horizontal space).
constexpr std::string_view kOnigHex = "0-9a-fA-F";

bool is_general_category(std::string_view name) {
  static constexpr std::string_view kNames[] = {
      "L",  "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N",  "Nd", "Nl", "No", "P",  "Pc",
      "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z",  "Zs", "Zl", "Zp", "Cf"};
  for (auto n : kNames) {
    if (n == name) return true;
  }
  return false;
}

// Class items for the code points assigned after PCRE2's Unicode version whose general category
// is `gc` (one letter: the whole major class). Empty when there are none.
std::string unicode_additions(std::string_view gc, bool enabled = true) {
  std::string out;
  if (!enabled) return out;
  char buf[40];
  for (const UnicodeAddition& a : kUnicodeAdditions) {
    const std::string_view cat(a.category, 2);
    if (gc.size() == 1 ? cat[0] != gc[0] : cat != gc) continue;
    if (a.first == a.last) {
      std::snprintf(buf, sizeof(buf), "\\x{%X}", unsigned(a.first));
    } else {
      std::snprintf(buf, sizeof(buf), "\\x{%X}-\\x{%X}", unsigned(a.first), unsigned(a.last));
    }
    out += buf;
  }
  return out;
}

// Word characters among the additions: Alphabetic ones are letters, Nl, or marks.
std::string word_additions(bool enabled) {
  return unicode_additions("L", enabled) + unicode_additions("M", enabled) +
         unicode_additions("Nd", enabled) + unicode_additions("Nl", enabled) +
         unicode_additions("Pc", enabled);
}

}  // namespace

std::string onig_to_pcre2(std::string_view p, bool with_additions) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  size_t class_start = 0;  // index in `p` just after '[' or '[^' of the current class
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[++i];
      std::string original = std::string("\\") + e;
      std::string items;  // class items to use instead, when non-empty
      bool negated = false;
      switch (e) {
        case 's':
        case 'S': items = kOnigSpace, negated = e == 'S'; break;
        case 'w':
        case 'W':
          items = std::string(kOnigWord) + word_additions(with_additions);
          if (!in_class) items += kOnigWordLatin1Extra;
          negated = e == 'W';
          break;
        case 'h':
        case 'H': items = kOnigHex, negated = e == 'H'; break;
        case 'd':
        case 'D':
          if (std::string adds = unicode_additions("Nd", with_additions); !adds.empty()) items = "\\d" + adds;
          negated = e == 'D';
          break;
        case 'p':
        case 'P': {
          // \p{Name} / \P{Name}: general categories get the code points PCRE2 does not know yet.
          const size_t close = p.find('}', i + 1);
          if (i + 1 < p.size() && p[i + 1] == '{' && close != std::string_view::npos) {
            original = std::string(p.substr(i - 1, close + 2 - i));
            const std::string_view name = p.substr(i + 2, close - i - 2);
            i = close;
            if (is_general_category(name)) {
              if (std::string adds = unicode_additions(name, with_additions); !adds.empty()) {
                items = "\\p{" + std::string(name) + "}" + adds;
              }
            }
            negated = e == 'P';
          }
          break;
        }
        default: break;
      }
      if (items.empty() || (in_class && negated)) {
        out += original;  // (a negated class inside a bracket class has no PCRE2 spelling: kept)
      } else if (in_class) {
        out += items;
      } else {
        out += negated ? "[^" : "[";
        out += items;
        out += ']';
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out.push_back(c);
      if (i + 1 < p.size() && p[i + 1] == '^') out.push_back(p[++i]);
      class_start = i + 1;
      continue;
    }
    if (in_class) {
      if (c == '[' && i + 1 < p.size() && p[i + 1] == ':') {  // POSIX class [:alpha:]
        const size_t end = p.find(":]", i + 2);
        if (end != std::string_view::npos) {
          out.append(p.substr(i, end + 2 - i));
          i = end + 1;
          continue;
        }
      }
      if (c == ']' && i != class_start) in_class = false;  // a ']' first in a class is literal
    }
    out.push_back(c);
  }
  return out;
}

std::string pcre2_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    const auto u = static_cast<unsigned char>(c);
    const bool alnum = (u >= '0' && u <= '9') || (u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z');
    if (u < 0x80 && !alnum) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

struct Regex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

namespace {

// Per-thread matching state: match data (one ovector pair suffices, we only need the whole
// match), a JIT stack that can grow to 16 MiB for long whitespace runs, and a match context.
struct ThreadMatchState {
  pcre2_match_data* data = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  pcre2_match_context* context = nullptr;
  ThreadMatchState() {
    data = pcre2_match_data_create(1, nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 16 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    LOOM_CHECK(data && jit_stack && context) << "PCRE2 allocation failed";
    pcre2_jit_stack_assign(context, nullptr, jit_stack);
    // The interpreter (fallback) may use as much heap as the subject needs.
    pcre2_set_heap_limit(context, 1u << 30);
    pcre2_set_match_limit(context, 0xFFFFFFFFu);
  }
  ~ThreadMatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
    pcre2_match_data_free(data);
  }
};

ThreadMatchState& thread_match_state() {
  thread_local ThreadMatchState state;
  return state;
}

std::string pcre2_error_text(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

core::Expected<std::shared_ptr<const Regex::Code>> Regex::compile(const std::string& pcre2_pattern) {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre2_pattern.data()), pcre2_pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (code == nullptr) {
    return core::invalid_argument("bad pre-tokenizer regex '" + pcre2_pattern + "' at offset " +
                                  std::to_string(err_offset) + ": " + pcre2_error_text(err));
  }
  auto c = std::make_shared<Code>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;  // falls back to the interpreter
  return std::shared_ptr<const Code>(std::move(c));
}

core::Expected<Regex> Regex::from_oniguruma(std::string_view pattern) {
  Regex r;
  r.pattern_ = onig_to_pcre2(pattern);
  LOOM_ASSIGN_OR_RETURN(r.code_, compile(r.pattern_));
  if (const std::string fast = onig_to_pcre2(pattern, /*with_additions=*/false); fast != r.pattern_) {
    LOOM_ASSIGN_OR_RETURN(r.fast_code_, compile(fast));
  }
  return r;
}

core::Expected<Regex> Regex::literal(std::string_view text) {
  Regex r;
  r.pattern_ = pcre2_escape(text);
  LOOM_ASSIGN_OR_RETURN(r.code_, compile(r.pattern_));
  return r;
}

bool contains_unicode_addition(std::string_view s) {
  // Additions start at U+0897: only 3- and 4-byte sequences can hold one.
  static const std::vector<bool> pages = [] {  // 256-code-point pages holding an addition
    std::vector<bool> p(0x1100, false);
    for (const UnicodeAddition& a : kUnicodeAdditions) {
      for (char32_t page = a.first >> 8; page <= (a.last >> 8); ++page) p[page] = true;
    }
    return p;
  }();
  for (size_t i = 0; i < s.size(); ++i) {
    if (static_cast<unsigned char>(s[i]) < 0xE0) continue;
    char32_t cp;
    const int len = utf8_decode(s, i, &cp);
    if (pages[cp >> 8]) {
      for (const UnicodeAddition& a : kUnicodeAdditions) {
        if (cp >= a.first && cp <= a.last) return true;
      }
    }
    i += len - 1;
  }
  return false;
}

bool Regex::search(const Code& code, std::string_view subject, size_t start, size_t* mstart,
                   size_t* mend) const {
  ThreadMatchState& st = thread_match_state();
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  int rc;
  if (code.jit) {
    rc = pcre2_jit_match(code.code, s, subject.size(), start, 0, st.data, st.context);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      // JIT stack exhausted on a pathological subject: the interpreter has a heap-backed stack.
      rc = pcre2_match(code.code, s, subject.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, st.data,
                       st.context);
    }
  } else {
    rc = pcre2_match(code.code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, st.data, st.context);
  }
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  LOOM_CHECK(rc >= 0) << "PCRE2 match failed for /" << pattern_ << "/: " << pcre2_error_text(rc);
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.data);
  *mstart = ov[0];
  *mend = ov[1];
  return true;
}

void Regex::find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>* matches) const {
  const Code& code = fast_code_ && !contains_unicode_addition(subject) ? *fast_code_ : *code_;
  size_t pos = 0;
  bool have_prev = false;
  size_t prev_end = 0;
  while (pos <= subject.size()) {
    size_t ms, me;
    if (!search(code, subject, pos, &ms, &me)) break;
    if (ms == me && have_prev && prev_end == me) {
      // Empty match glued to the previous one: skip one character and search again.
      pos += pos < subject.size() ? utf8_len(static_cast<unsigned char>(subject[pos])) : 1;
      continue;
    }
    matches->emplace_back(ms, me);
    have_prev = true;
    prev_end = me;
    pos = me;  // after an empty match the next search lands on the rule above
  }
}

}  // namespace loom::text::detail
