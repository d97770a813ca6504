// The loaded state of a Tokenizer (shared, immutable after loading). Internal to src/text/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "text/bpe.h"
#include "text/tokenizer.h"
#include "text/tokenizer_added.h"
#include "text/tokenizer_regex.h"
#include "text/tokenizer_unicode.h"

namespace loom::text {

namespace detail {

// tokenizers' SplitDelimiterBehavior.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kDigits };
  Kind kind = Kind::kSplit;
  // kSplit (and kByteLevel with use_regex, which splits Isolated with GPT-2's pattern).
  Regex regex;
  bool has_regex = false;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  // kByteLevel
  bool add_prefix_space = false;
  // kDigits
  bool individual_digits = false;
};

// One element of a post-processor template for a single sequence: the encoded text, or fixed ids.
struct TemplateItem {
  bool is_sequence = false;
  std::vector<int32_t> ids;
};
using PostProcessorStep = std::vector<TemplateItem>;

enum class DecoderKind { kNone, kByteLevel };

}  // namespace detail

struct Tokenizer::Impl {
  detail::BpeModel bpe;
  std::vector<detail::NormalizationForm> normalizers;  // applied in order
  std::vector<detail::PreTokenizerStep> pre_tokenizer;
  std::vector<detail::PostProcessorStep> post_processor;
  detail::DecoderKind decoder = detail::DecoderKind::kNone;

  std::vector<detail::AddedToken> added_tokens;  // with the ids `tokenizers` assigns
  detail::StringIdMap added_by_content;
  detail::AddedTokenMatcher raw_matcher;         // added tokens with normalized = false
  detail::AddedTokenMatcher normalized_matcher;  // added tokens with normalized = true

  // Per id, 0 <= id < vocab_size.
  enum IdFlags : uint8_t { kKnown = 1, kSpecial = 2, kSkipWhenSkippingSpecial = 4 };
  int32_t vocab_size = 0;
  std::vector<uint8_t> id_flags;
  std::vector<uint32_t> token_offsets;  // [vocab_size + 1] into token_strings
  std::string token_strings;            // id_to_token texts, concatenated
  std::vector<uint32_t> bytes_offsets;  // [vocab_size + 1] into token_byte_strings
  std::string token_byte_strings;       // token_bytes texts, concatenated

  std::string_view token_string(int32_t id) const {
    return std::string_view(token_strings)
        .substr(token_offsets[id], token_offsets[id + 1] - token_offsets[id]);
  }
  std::string_view token_bytes(int32_t id) const {
    return std::string_view(token_byte_strings)
        .substr(bytes_offsets[id], bytes_offsets[id + 1] - bytes_offsets[id]);
  }
  bool known(int32_t id) const { return id >= 0 && id < vocab_size && (id_flags[id] & kKnown); }
};

// Builds an Impl from tokenizer.json text (tokenizer_load.cpp).
core::Expected<std::shared_ptr<const Tokenizer::Impl>> load_tokenizer_impl(std::string_view json_text);

}  // namespace loom::text
