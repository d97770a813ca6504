#include "text/tokenizer_unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "core/check.h"
#include "core/utf8.h"
#include "text/tokenizer_unicode_tables.h"

namespace loom::text::detail {

void append_utf8(std::string& out, char32_t cp) {
  core::append_utf8(out, cp);
}

namespace {

ByteLevelAlphabet make_byte_level_alphabet() {
  ByteLevelAlphabet a{};
  for (auto& v : a.char_to_byte_) v = -1;
  auto printable = [](int b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; };
  char32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = printable(b) ? char32_t(b) : next++;
    a.byte_to_char[b] = cp;
    append_utf8(a.byte_to_utf8[b], cp);
    a.char_to_byte_[cp] = static_cast<int16_t>(b);
  }
  return a;
}

// Length of the valid UTF-8 sequence starting at bytes[i], 0 when the bytes there are invalid
// (then *bad_len is the length of the maximal invalid subpart, 1..3), or -1 when the input ends
// inside a sequence that is valid so far.
int utf8_sequence(std::string_view bytes, size_t i, int* bad_len) {
  const auto b0 = static_cast<unsigned char>(bytes[i]);
  if (b0 < 0x80) return 1;
  int width;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    width = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    width = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    width = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    *bad_len = 1;
    return 0;
  }
  for (int k = 1; k < width; ++k) {
    if (i + k >= bytes.size()) return -1;
    const auto b = static_cast<unsigned char>(bytes[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) {
      *bad_len = k;
      return 0;
    }
  }
  return width;
}

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet alphabet = make_byte_level_alphabet();
  return alphabet;
}

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      __builtin_memcpy(&w, s.data() + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    int bad = 0;
    const int len = utf8_sequence(s, i, &bad);
    if (len <= 0) return false;
    i += len;
  }
  return true;
}

void append_utf8_lossy(std::string& out, std::string_view bytes) {
  size_t i = 0;
  size_t run_start = 0;  // start of the current run of valid bytes, copied in one go
  while (i < bytes.size()) {
    int bad = 0;
    const int len = utf8_sequence(bytes, i, &bad);
    if (len > 0) {
      i += len;
      continue;
    }
    out.append(bytes.substr(run_start, i - run_start));
    out.append(kReplacement);
    i = len < 0 ? bytes.size() : i + bad;  // an incomplete tail is one maximal subpart
    run_start = i;
  }
  out.append(bytes.substr(run_start, i - run_start));
}

size_t utf8_decodable_prefix(std::string_view bytes) {
  // Only the last 3 bytes can hold the start of an incomplete sequence.
  const size_t n = bytes.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const size_t i = n - back;
    const auto b = static_cast<unsigned char>(bytes[i]);
    if (b < 0x80) return n;            // ASCII ends any sequence before it
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: look further back
    int bad = 0;
    // The last lead byte: hold it back iff its sequence is valid so far but runs past the end. (A
    // lead byte always starts a new unit of the lossy parse, so the cut is a unit boundary.)
    return utf8_sequence(bytes, i, &bad) < 0 ? i : n;
  }
  return n;
}

bool is_white_space(char32_t cp) {
  if (cp < 0x80) return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
         cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

bool is_word_char(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;  // Join_Control
  // Symbols that are Other_Alphabetic (circled / squared / negative-circled Latin letters).
  if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
      (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189)) {
    return true;
  }
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
  }
}

bool is_numeric(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_ND || cat == UTF8PROC_CATEGORY_NL || cat == UTF8PROC_CATEGORY_NO;
}

namespace {

utf8proc_option_t utf8proc_options(NormalizationForm form) {
  switch (form) {
    case NormalizationForm::kNfc: return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    case NormalizationForm::kNfd: return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
    case NormalizationForm::kNfkc:
      return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
    case NormalizationForm::kNfkd:
      return utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  }
  return utf8proc_option_t(0);
}

// Every code point with normalization data lies below U+30000 (the last is U+2FA1D).
constexpr char32_t kNfcTableEnd = 0x30000;

// utf8proc has normalization data for cp.
bool utf8proc_relevant(char32_t cp) {
  if (cp >= 0xAC00 && cp <= 0xD7A3) return true;  // Hangul syllables decompose algorithmically
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  return p->combining_class != 0 || p->decomp_seqindex != UINT16_MAX || p->comb_index != UINT16_MAX;
}

// Code points utf8proc would normalize but `tokenizers`' older Unicode tables know nothing about
// (kNormalizationKnown): tokenizers treats them as plain starters, so we keep them away from
// utf8proc. Such a starter can neither compose nor reorder with its neighbours, so text splits
// around it into independently normalized segments.
bool masked(char32_t cp) {
  static const std::vector<bool> table = [] {
    std::vector<bool> known(kNfcTableEnd, false), t(kNfcTableEnd, false);
    for (const CodePointRange& r : kNormalizationKnown) {
      for (char32_t c = r.first; c <= r.last && c < kNfcTableEnd; ++c) known[c] = true;
    }
    for (char32_t c = 0x80; c < kNfcTableEnd; ++c) {
      if (c >= 0xD800 && c <= 0xDFFF) continue;
      t[c] = !known[c] && utf8proc_relevant(c);
    }
    return t;
  }();
  if (cp < 0x80) return false;
  // U+11A7 is the jamo just before the trailing consonants (T_BASE): utf8proc 2.8 wrongly composes
  // an LV syllable with it, while tokenizers (Rust's unicode-normalization) leaves both alone.
  if (cp == 0x11A7) return true;
  return cp < kNfcTableEnd ? table[cp] : utf8proc_relevant(cp);
}

std::string utf8proc_normalize(NormalizationForm form, std::string_view in) {
  if (in.empty()) return {};
  utf8proc_uint8_t* dst = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(in.data()),
                   static_cast<utf8proc_ssize_t>(in.size()), &dst, utf8proc_options(form));
  // utf8proc fails only on invalid UTF-8 or out of memory; callers pass validated text.
  LOOM_CHECK(n >= 0) << "utf8proc_map failed: " << utf8proc_errmsg(n);
  std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  std::free(dst);
  return out;
}

// Code points below kNfcTableEnd that might change or make their neighbourhood change under NFC:
// non-zero combining class, possible second element of a composition, Hangul conjoining jamo, or a
// canonical decomposition that NFC does not restore (singletons, exclusions). Masked code points
// are stable by definition (tokenizers leaves them alone).
bool nfc_unstable_by_property(char32_t cp) {
  if (masked(cp)) return false;
  // Conjoining jamo compose algorithmically: leading L, vowel V, trailing T.
  if ((cp >= 0x1100 && cp <= 0x1112) || (cp >= 0x1161 && cp <= 0x1175) || (cp >= 0x11A8 && cp <= 0x11C2)) {
    return true;
  }
  const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
  if (p->combining_class != 0) return true;
  return p->comb_index != UINT16_MAX && p->comb_index >= 0x8000;  // can be a composition's 2nd char
}

std::vector<bool> make_nfc_unstable_table() {
  std::vector<bool> t(kNfcTableEnd, false);
  std::string one;
  for (char32_t cp = 0x80; cp < kNfcTableEnd; ++cp) {
    if ((cp >= 0xD800 && cp <= 0xDFFF) || masked(cp)) continue;
    if (nfc_unstable_by_property(cp)) {
      t[cp] = true;
      continue;
    }
    const utf8proc_property_t* p = utf8proc_get_property(static_cast<utf8proc_int32_t>(cp));
    const bool hangul = cp >= 0xAC00 && cp <= 0xD7A3;
    if (p->decomp_seqindex != UINT16_MAX || hangul) {
      one.clear();
      append_utf8(one, cp);
      if (utf8proc_normalize(NormalizationForm::kNfc, one) != one) t[cp] = true;
    }
  }
  return t;
}

bool nfc_unstable(char32_t cp) {
  static const std::vector<bool> table = make_nfc_unstable_table();
  return cp < kNfcTableEnd ? table[cp] : nfc_unstable_by_property(cp);
}

// NFC that runs utf8proc only where needed. A "stable" code point (see nfc_unstable) is a starter
// that nothing before it can combine with, so NFC never reaches across the boundary in front of
// it: text splits there into spans that normalize independently. Each span holding an unstable
// code point goes to utf8proc, starting from the stable character before it (marks may compose with
// that starter; a masked one composes with nothing and stays out); the rest is copied. Returns
// false when nothing changes.
bool nfc_by_spans(std::string_view s, std::string* out) {
  std::string result;
  size_t copied = 0;      // s[0, copied) is already in `result`
  size_t span_floor = 0;  // where a span may begin: the last stable code point, or just after it if masked
  bool changed = false;
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      span_floor = i++;
      continue;
    }
    char32_t cp;
    const int len = utf8_decode(s, i, &cp);
    if (!nfc_unstable(cp)) {
      span_floor = masked(cp) ? i + len : i;
      i += len;
      continue;
    }
    // Unstable: the span runs from span_floor to the next stable character.
    const size_t span_begin = std::max(span_floor, copied);
    size_t span_end = i + len;
    while (span_end < s.size()) {
      if (static_cast<unsigned char>(s[span_end]) < 0x80) break;
      char32_t c2;
      const int l2 = utf8_decode(s, span_end, &c2);
      if (!nfc_unstable(c2)) break;
      span_end += l2;
    }
    const std::string_view span = s.substr(span_begin, span_end - span_begin);
    std::string normalized = utf8proc_normalize(NormalizationForm::kNfc, span);
    if (normalized != span) {
      result.append(s.substr(copied, span_begin - copied));
      result.append(normalized);
      copied = span_end;
      changed = true;
    }
    i = span_end;
    span_floor = span_end;  // the next code point (if any) is stable; the loop refines this
  }
  if (!changed) return false;
  result.append(s.substr(copied));
  *out = std::move(result);
  return true;
}

bool is_ascii(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

std::string normalize_slow(NormalizationForm form, std::string_view in) {
  // utf8proc on the segments between masked code points, which are copied unchanged.
  std::string out;
  size_t segment = 0;
  for (size_t i = 0; i < in.size();) {
    if (static_cast<unsigned char>(in[i]) < 0x80) {
      ++i;
      continue;
    }
    char32_t cp;
    const int len = utf8_decode(in, i, &cp);
    if (masked(cp)) {
      out += utf8proc_normalize(form, in.substr(segment, i - segment));
      out.append(in.substr(i, len));
      segment = i + len;
    }
    i += len;
  }
  out += utf8proc_normalize(form, in.substr(segment));
  return out;
}

bool normalize(NormalizationForm form, std::string_view in, std::string* out) {
  if (is_ascii(in)) return false;  // ASCII is invariant under every normalization form
  if (form == NormalizationForm::kNfc) return nfc_by_spans(in, out);
  std::string r = normalize_slow(form, in);
  if (r == in) return false;
  *out = std::move(r);
  return true;
}

}  // namespace loom::text::detail
