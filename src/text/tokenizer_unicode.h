// Unicode helpers for the tokenizer: UTF-8 decoding, GPT-2's byte-level alphabet, lossy UTF-8
// repair (Rust's String::from_utf8_lossy rules), Unicode normalization (utf8proc) and the few
// character classes `tokenizers` uses outside its regexes. Internal to src/text/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::text::detail {

// Decodes the code point starting at s[i]. Precondition: s is valid UTF-8 and i < s.size().
// Returns the sequence length (1..4).
inline int utf8_decode(std::string_view s, size_t i, char32_t* cp) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  if (b0 < 0xE0) {
    *cp = (char32_t(b0 & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
    return 2;
  }
  if (b0 < 0xF0) {
    *cp = (char32_t(b0 & 0x0F) << 12) | (char32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
          (static_cast<unsigned char>(s[i + 2]) & 0x3F);
    return 3;
  }
  *cp = (char32_t(b0 & 0x07) << 18) | (char32_t(static_cast<unsigned char>(s[i + 1]) & 0x3F) << 12) |
        (char32_t(static_cast<unsigned char>(s[i + 2]) & 0x3F) << 6) |
        (static_cast<unsigned char>(s[i + 3]) & 0x3F);
  return 4;
}

// Length of the UTF-8 sequence a (valid) lead byte starts.
inline int utf8_len(unsigned char lead) {
  return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
}

void append_utf8(std::string& out, char32_t cp);

// GPT-2's bytes_to_unicode(): every byte maps to one printable code point (printable Latin-1
// bytes map to themselves, the other 68 to U+0100.. in byte order).
struct ByteLevelAlphabet {
  char32_t byte_to_char[256];
  std::string byte_to_utf8[256];
  // Inverse map; -1 for code points outside the alphabet.
  int char_to_byte(char32_t cp) const { return cp < 0x200 ? char_to_byte_[cp] : -1; }

  int16_t char_to_byte_[0x200];
};
const ByteLevelAlphabet& byte_level_alphabet();

// True when `s` is valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Appends `bytes` decoded as UTF-8, replacing each maximal invalid subsequence with U+FFFD exactly
// like Rust's String::from_utf8_lossy (which `tokenizers`' ByteLevel decoder uses).
void append_utf8_lossy(std::string& out, std::string_view bytes);

// Number of leading bytes of `bytes` that can be decoded now: everything except a trailing,
// still-incomplete but so far valid UTF-8 sequence (at most 3 bytes), which more bytes may complete.
// Lossy decoding is prefix-stable at this cut: lossy(b) == lossy(b[0,n)) + lossy(b[n,..)).
size_t utf8_decodable_prefix(std::string_view bytes);

// Unicode White_Space (Rust's char::is_whitespace, regex `\s`).
bool is_white_space(char32_t cp);
// Rust regex's Unicode `\w`: Alphabetic, Mark, Decimal_Number, Connector_Punctuation, Join_Control.
bool is_word_char(char32_t cp);
// Rust's char::is_numeric: general category Nd, Nl or No.
bool is_numeric(char32_t cp);

enum class NormalizationForm { kNfc, kNfd, kNfkc, kNfkd };

// Normalizes valid UTF-8 `in`. Returns false (and leaves `out` untouched) when `in` is already in
// the requested form, which a quick check proves for most text without running utf8proc.
bool normalize(NormalizationForm form, std::string_view in, std::string* out);
// The same without the quick checks (for tests of them): utf8proc, except that code points
// `tokenizers`' older Unicode tables do not know are left alone as it does.
std::string normalize_slow(NormalizationForm form, std::string_view in);

}  // namespace loom::text::detail
