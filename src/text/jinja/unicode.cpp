#include "text/jinja/unicode.h"

#include <cstdio>

#include "core/utf8.h"

#include <utf8proc.h>

namespace loom::text::jinja::unicode {

char32_t decode(std::string_view s, size_t* pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  size_t i = *pos;
  unsigned char c = p[i];
  auto escape = [&]() {
    *pos = i + 1;
    return static_cast<char32_t>(0xDC00 + c);
  };
  if (c < 0x80) {
    *pos = i + 1;
    return c;
  }
  int extra;
  char32_t cp;
  if ((c & 0xE0) == 0xC0) {
    extra = 1;
    cp = c & 0x1F;
  } else if ((c & 0xF0) == 0xE0) {
    extra = 2;
    cp = c & 0x0F;
  } else if ((c & 0xF8) == 0xF0) {
    extra = 3;
    cp = c & 0x07;
  } else {
    return escape();
  }
  if (i + extra >= s.size()) return escape();
  for (int k = 1; k <= extra; ++k) {
    unsigned char cc = p[i + k];
    if ((cc & 0xC0) != 0x80) return escape();
    cp = (cp << 6) | (cc & 0x3F);
  }
  // Reject overlong forms, surrogates and out-of-range values.
  static constexpr char32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[extra] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return escape();
  *pos = i + 1 + extra;
  return cp;
}

void append(std::string& out, char32_t cp) {
  if (cp >= 0xDC80 && cp <= 0xDCFF) {  // surrogate-escaped raw byte
    out.push_back(static_cast<char>(cp - 0xDC00));
  } else {
    core::append_utf8(out, cp);
  }
}

void append_escaped(std::string& out, char32_t cp) {
  char buf[16];
  if (cp <= 0xFF) {
    std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(cp));
  } else if (cp <= 0xFFFF) {
    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
  } else {
    std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(cp));
  }
  out += buf;
}

std::u32string to_u32(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) out.push_back(decode(s, &pos));
  return out;
}

std::string to_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t cp : s) append(out, cp);
  return out;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

size_t length(std::string_view s) {
  size_t n = 0;
  size_t pos = 0;
  while (pos < s.size()) {
    if (static_cast<unsigned char>(s[pos]) < 0x80) {
      ++pos;
    } else {
      decode(s, &pos);
    }
    ++n;
  }
  return n;
}

bool is_space(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace {

utf8proc_category_t category(char32_t cp) {
  if (cp > 0x10FFFF) return UTF8PROC_CATEGORY_CN;
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp));
}

}  // namespace

bool is_printable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp >= 0xDC80 && cp <= 0xDCFF) return false;
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

bool is_upper(char32_t cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z';
  return utf8proc_isupper(static_cast<utf8proc_int32_t>(cp));
}

bool is_lower(char32_t cp) {
  if (cp < 0x80) return cp >= 'a' && cp <= 'z';
  return utf8proc_islower(static_cast<utf8proc_int32_t>(cp));
}

bool is_cased(char32_t cp) {
  if (is_upper(cp) || is_lower(cp)) return true;
  return category(cp) == UTF8PROC_CATEGORY_LT;
}

bool is_alpha(char32_t cp) {
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: return true;
    default: return false;
  }
}

bool is_decimal(char32_t cp) {
  return category(cp) == UTF8PROC_CATEGORY_ND;
}

bool is_digit(char32_t cp) {
  // Python's isdigit also accepts superscripts and similar (Numeric_Type=Digit); Nd plus the common
  // superscript/subscript digits covers what templates meet.
  if (is_decimal(cp)) return true;
  return cp == 0xB2 || cp == 0xB3 || cp == 0xB9 || (cp >= 0x2070 && cp <= 0x2079) ||
         (cp >= 0x2080 && cp <= 0x2089);
}

bool is_alnum(char32_t cp) {
  return is_alpha(cp) || is_digit(cp) || category(cp) == UTF8PROC_CATEGORY_NL ||
         category(cp) == UTF8PROC_CATEGORY_NO;
}

char32_t to_upper(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') ? cp - 32 : cp;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}

char32_t to_lower(char32_t cp) {
  if (cp < 0x80) return (cp >= 'A' && cp <= 'Z') ? cp + 32 : cp;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}

char32_t to_title(char32_t cp) {
  if (cp < 0x80) return to_upper(cp);
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return cp;
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp)));
}

namespace {

struct SpecialCase {
  char32_t cp;
  char32_t upper[3];
  char32_t lower[3];
  char32_t title[3];
};

constexpr SpecialCase kSpecialCasing[] = {
#include "text/jinja/special_casing.inc"
};

const SpecialCase* special_case(char32_t cp) {
  if (cp < 0xDF) return nullptr;
  size_t lo = 0, hi = sizeof(kSpecialCasing) / sizeof(kSpecialCasing[0]);
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (kSpecialCasing[mid].cp < cp) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo < sizeof(kSpecialCasing) / sizeof(kSpecialCasing[0]) && kSpecialCasing[lo].cp == cp
             ? &kSpecialCasing[lo]
             : nullptr;
}

void append_mapping(std::string& out, const char32_t (&m)[3]) {
  for (char32_t c : m) {
    if (c == 0) break;
    append(out, c);
  }
}

// Unicode Case_Ignorable (approximation: combining marks, format characters, modifiers and the
// word-internal punctuation of Word_Break MidLetter/MidNumLet/Single_Quote).
bool case_ignorable(char32_t cp) {
  switch (cp) {
    case 0x27:
    case 0x2E:
    case 0x3A:
    case 0x5E:
    case 0x60:
    case 0xA8:
    case 0xAD:
    case 0xAF:
    case 0xB4:
    case 0xB7:
    case 0xB8:
    case 0x2018:
    case 0x2019:
    case 0x2024:
    case 0x2027:
    case 0xFE13:
    case 0xFE52:
    case 0xFE55:
    case 0xFF07:
    case 0xFF0E:
    case 0xFF1A: return true;
    default: break;
  }
  switch (category(cp)) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK: return true;
    default: return false;
  }
}

}  // namespace

void append_upper(std::string& out, char32_t cp) {
  if (const SpecialCase* s = special_case(cp)) return append_mapping(out, s->upper);
  append(out, to_upper(cp));
}

void append_lower(std::string& out, char32_t cp) {
  if (const SpecialCase* s = special_case(cp)) return append_mapping(out, s->lower);
  append(out, to_lower(cp));
}

void append_title(std::string& out, char32_t cp) {
  if (const SpecialCase* s = special_case(cp)) return append_mapping(out, s->title);
  append(out, to_title(cp));
}

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t pos = 0;
  while (pos < s.size()) append_upper(out, decode(s, &pos));
  return out;
}

std::string lower(std::string_view s) {
  if (is_ascii(s)) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  std::u32string u = to_u32(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < u.size(); ++i) {
    if (u[i] == 0x03A3) {
      // Final sigma: preceded by a cased letter and not followed by one (case-ignorables skipped).
      size_t j = i;
      bool before = false, after = false;
      while (j > 0) {
        --j;
        if (case_ignorable(u[j])) continue;
        before = is_cased(u[j]);
        break;
      }
      for (size_t k = i + 1; k < u.size(); ++k) {
        if (case_ignorable(u[k])) continue;
        after = is_cased(u[k]);
        break;
      }
      append(out, before && !after ? 0x03C2 : 0x03C3);
      continue;
    }
    append_lower(out, u[i]);
  }
  return out;
}

}  // namespace loom::text::jinja::unicode
