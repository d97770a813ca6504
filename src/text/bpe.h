// The BPE model of a Hugging Face tokenizer.json, merging exactly like `tokenizers`' BPE
// (models/bpe/word.rs: a min-heap of (rank, position) with stale entries skipped). Internal to
// src/text/.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "text/tokenizer_string_map.h"

namespace loom::text::detail {

struct BpeConfig {
  StringIdMap vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  // Words arrive as raw bytes that the ByteLevel pre-tokenizer maps to GPT-2's byte alphabet before
  // the model sees them (the mapping is done here, lazily, so cache hits skip it).
  bool byte_level_input = false;
};

class BpeModel {
 public:
  // Fails (InvalidArgument) when a merge or the unk token refers to a token outside the vocab.
  static core::Expected<BpeModel> create(BpeConfig config);

  // Appends the ids of one pre-token. Results are cached per thread, keyed by the word.
  void encode_word(std::string_view word, std::vector<int32_t>* out) const;

  // Runs the model without the cache (tests compare both paths).
  void encode_word_uncached(std::string_view word, std::vector<int32_t>* out) const;

  const StringIdMap& vocab() const { return vocab_; }

 private:
  struct MergeSlot {
    uint64_t key = ~uint64_t{0};  // (left id << 32) | right id; all ones = empty
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  // The merge (rank, new id) for an adjacent pair, or nullptr.
  const MergeSlot* find_merge(int32_t left, int32_t right) const;
  void insert_merge(int32_t left, int32_t right, int32_t rank, int32_t new_id);
  void initial_symbols(std::string_view word, std::vector<int32_t>* ids, std::vector<int32_t>* lens) const;

  StringIdMap vocab_;
  std::vector<MergeSlot> merge_table_;  // open addressing, power-of-two size
  uint64_t merge_mask_ = 0;
  std::optional<int32_t> unk_id_;
  std::string prefix_, suffix_;
  bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false, byte_level_ = false;
  // Byte-level words whose 256 single-byte tokens all exist and need no prefix/suffix start from
  // these ids directly, without building the mapped string.
  bool direct_bytes_ = false;
  int32_t byte_ids_[256] = {};
  uint64_t cache_owner_ = 0;  // identifies this model's per-thread word caches
};

}  // namespace loom::text::detail
