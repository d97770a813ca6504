// The pre-tokenizer regex: PCRE2 (UTF + UCP, JIT) made to behave like the Oniguruma regexes
// `tokenizers` runs. Internal to src/text/.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"

namespace loom::text::detail {

// Rewrites an Oniguruma (Ruby syntax) pattern as used in tokenizer.json into PCRE2 syntax with the
// same meaning, as measured against `tokenizers` 0.23:
//  - `\s` is Unicode White_Space in Oniguruma; PCRE2's (with UCP) also matches U+180E.
//  - `\w` is Alphabetic|Mark|Nd|Pc (plus ¹²³¼½¾ outside brackets); PCRE2's is Letter|Number|_.
//  - `\h` is a hex digit in Oniguruma, horizontal space in PCRE2.
//  - `\p{<general category>}`, `\d`, `\w` get the code points assigned after PCRE2's Unicode version
//    (kUnicodeAdditions in tokenizer_unicode_tables.h), so both engines classify Unicode 15/16 characters
//    alike.
// Negated forms (`\S`, `\P{L}`, ...) inside a bracket class have no PCRE2 spelling without class
// operators and are kept as they are. Script properties (`\p{Han}`) are passed through unchanged
// (PCRE2 matches Script_Extensions there, Oniguruma Script).
// With unicode_additions=false the additions are left out (the faster pattern for text that holds
// none of those code points).
std::string onig_to_pcre2(std::string_view pattern, bool unicode_additions = true);

// Whether `s` (valid UTF-8) holds a code point listed in kUnicodeAdditions (tokenizer_unicode_tables.h).
bool contains_unicode_addition(std::string_view s);

// PCRE2 escape of a literal string (for `{"String": ...}` split patterns).
std::string pcre2_escape(std::string_view literal);

class Regex {
 public:
  // A tokenizer.json {"Regex": ...} pattern (Oniguruma syntax), translated with onig_to_pcre2.
  // Compiled twice when the additions change it: subjects without post-Unicode-14 code points use
  // the variant without the long addition ranges, which PCRE2's JIT matches about twice as fast.
  static core::Expected<Regex> from_oniguruma(std::string_view pattern);
  // A tokenizer.json {"String": ...} pattern: the literal text.
  static core::Expected<Regex> literal(std::string_view text);

  // Appends the [start, end) byte ranges of successive matches in `subject`, iterating like the
  // Oniguruma crate's find_iter: after a match the search resumes at its end; an empty match right
  // at the end of the previous match is dropped and the search moves one character on.
  void find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>>* matches) const;

  const std::string& pattern() const { return pattern_; }

 private:
  struct Code;
  static core::Expected<std::shared_ptr<const Code>> compile(const std::string& pcre2_pattern);
  // Searches from `start`; returns false when there is no match.
  bool search(const Code& code, std::string_view subject, size_t start, size_t* mstart, size_t* mend) const;

  std::shared_ptr<const Code> code_;       // the full translation
  std::shared_ptr<const Code> fast_code_;  // without Unicode additions; null when identical
  std::string pattern_;
};

}  // namespace loom::text::detail
