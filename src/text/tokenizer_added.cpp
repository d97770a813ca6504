#include "text/tokenizer_added.h"

#include <algorithm>

#include "text/tokenizer_unicode.h"

namespace loom::text::detail {

namespace {

// The code point that ends `s` (non-empty, valid UTF-8) and its start offset.
char32_t last_char(std::string_view s, size_t* start) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  char32_t cp;
  utf8_decode(s, i, &cp);
  *start = i;
  return cp;
}

bool ends_with_word(std::string_view s) {
  size_t start;
  return !s.empty() && is_word_char(last_char(s, &start));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  char32_t cp;
  utf8_decode(s, 0, &cp);
  return is_word_char(cp);
}

// Start of the run of White_Space that ends `s` (s.size() when there is none).
size_t trailing_space_start(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start;
    if (!is_white_space(last_char(s.substr(0, end), &start))) break;
    end = start;
  }
  return end;
}

// Length of the run of White_Space that starts `s`.
size_t leading_space_len(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    char32_t cp;
    const int len = utf8_decode(s, i, &cp);
    if (!is_white_space(cp)) break;
    i += len;
  }
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<std::string>& patterns,
                                     const std::vector<AddedToken>& tokens) {
  nodes_.emplace_back();
  for (size_t p = 0; p < patterns.size(); ++p) {
    const std::string& pat = patterns[p];
    if (pat.empty()) continue;
    int32_t node = 0;
    for (unsigned char b : pat) {
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.emplace_back();
        auto& edges = nodes_[node].next;
        edges.insert(std::lower_bound(edges.begin(), edges.end(), std::make_pair(b, int32_t{0})),
                     std::make_pair(b, next));
      }
      node = next;
    }
    if (nodes_[node].pattern < 0) {
      nodes_[node].pattern = static_cast<int32_t>(tokens_.size());
      tokens_.push_back(tokens[p]);
    }
    first_byte_[static_cast<unsigned char>(pat[0])] = true;
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char b) const {
  const auto& edges = nodes_[node].next;
  auto it = std::lower_bound(edges.begin(), edges.end(), std::make_pair(b, int32_t{0}));
  return it != edges.end() && it->first == b ? it->second : -1;
}

void AddedTokenMatcher::split(std::string_view text, bool skip_special, std::vector<Piece>* pieces) const {
  const size_t n = text.size();
  if (n == 0) return;
  size_t start_offset = 0;  // end of the last emitted piece
  size_t i = 0;
  while (i < n) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    // Longest pattern starting at i.
    int32_t best = -1;
    size_t best_end = 0;
    for (size_t j = i, node = 0; j < n; ++j) {
      const int32_t next = child(static_cast<int32_t>(node), static_cast<unsigned char>(text[j]));
      if (next < 0) break;
      node = static_cast<size_t>(next);
      if (nodes_[node].pattern >= 0) {
        best = nodes_[node].pattern;
        best_end = j + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    // The automaton resumes after the raw match even when the match is discarded below.
    size_t start = i, stop = best_end;
    i = best_end;
    const AddedToken& tok = tokens_[best];
    if (skip_special && tok.special) continue;
    if (tok.single_word) {
      const bool start_ok = start == 0 || !ends_with_word(text.substr(0, start));
      const bool stop_ok = stop == n || !starts_with_word(text.substr(stop));
      if (!start_ok || !stop_ok) continue;
    }
    if (tok.lstrip) start = std::max(trailing_space_start(text.substr(0, start)), start_offset);
    if (tok.rstrip) stop += leading_space_len(text.substr(stop));
    if (start_offset < start) pieces->push_back({start_offset, start, -1});
    pieces->push_back({start, stop, tok.id});
    start_offset = stop;
  }
  if (start_offset != n) pieces->push_back({start_offset, n, -1});
}

}  // namespace loom::text::detail
