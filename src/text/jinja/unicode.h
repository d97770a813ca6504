// UTF-8 and Unicode helpers with Python's str semantics: Python strings index, slice and measure by
// code point, strip "whitespace" per str.isspace(), and change case per code point. Strings are kept
// as UTF-8 everywhere; these helpers convert to code points only where Python semantics need them.
//
// Invalid UTF-8 bytes decode to U+DC80..U+DCFF (Python's "surrogateescape") and encode back to the
// same byte, so no byte sequence is ever lost or altered by a round trip.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::text::jinja::unicode {

// Decodes the code point at s[*pos] and advances *pos past it.
char32_t decode(std::string_view s, size_t* pos);
void append(std::string& out, char32_t cp);
// Python's backslash escape of a non-ASCII code point: \xhh, \uhhhh or \Uhhhhhhhh.
void append_escaped(std::string& out, char32_t cp);

std::u32string to_u32(std::string_view s);
std::string to_utf8(std::u32string_view s);

bool is_ascii(std::string_view s);
// Number of code points (Python len()).
size_t length(std::string_view s);

// Python str.isspace() for one code point (Unicode White_Space minus a few, plus \x1c-\x1f).
bool is_space(char32_t cp);
// Python str.isprintable() for one code point (used by repr()).
bool is_printable(char32_t cp);
bool is_cased(char32_t cp);
bool is_upper(char32_t cp);
bool is_lower(char32_t cp);
bool is_alpha(char32_t cp);
bool is_decimal(char32_t cp);
bool is_digit(char32_t cp);
bool is_alnum(char32_t cp);

// One-to-one case mappings (utf8proc).
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);
char32_t to_title(char32_t cp);

// Python's full case mappings of one code point, appended as UTF-8: the one-to-one mapping, or the
// SpecialCasing expansion ("ß" -> "SS", "ﬁ" -> "FI" / "Fi", "İ" -> "i̇"; table in special_casing.inc).
void append_upper(std::string& out, char32_t cp);
void append_lower(std::string& out, char32_t cp);
void append_title(std::string& out, char32_t cp);

// str.upper() / str.lower() (lower() also applies the final-sigma rule, as CPython does).
std::string upper(std::string_view s);
std::string lower(std::string_view s);

}  // namespace loom::text::jinja::unicode
