// Added tokens (special and not) of a tokenizer.json, split out of the text before the model runs,
// with `tokenizers`' AddedVocabulary rules. Internal to src/text/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::text::detail {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  // What id_to_token() and decode() use: the content run through the normalizer when normalized
  // (tokenizers' normalized_cache), else the content itself.
  std::string decode_form;
};

// One piece of a split: either text for the next stage (id < 0) or an added token.
struct Piece {
  size_t begin;
  size_t end;
  int32_t id;
};

// Finds added tokens in text: leftmost-longest over all patterns of one set (like the aho-corasick
// automaton with MatchKind::LeftmostLongest), then single_word / lstrip / rstrip applied to each
// match as AddedVocabulary::find_matches does.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `patterns[i]` is what to look for (the content, or its normalized form); `tokens[i]` the
  // token it stands for. Earlier patterns win over identical later ones. Empty patterns are ignored.
  AddedTokenMatcher(const std::vector<std::string>& patterns, const std::vector<AddedToken>& tokens);

  bool empty() const { return tokens_.empty(); }

  // Splits `text` into pieces covering it in order (an added-token piece may include whitespace
  // taken by lstrip/rstrip). With skip_special, special tokens are left in the text (tokenizers'
  // encode_special_tokens = true). Empty text gives no pieces.
  void split(std::string_view text, bool skip_special, std::vector<Piece>* pieces) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
    int32_t pattern = -1;                                 // index into tokens_ when a pattern ends here
  };
  int32_t child(int32_t node, unsigned char b) const;

  std::vector<Node> nodes_;
  std::vector<AddedToken> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace loom::text::detail
