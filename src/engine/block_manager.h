// Owns the metadata of the paged KV cache: which fixed-size blocks are free and which
// sequence holds which. The KV memory itself belongs to the runner (engine.h); kernels
// see only block tables. Prefix caching (content hashes, LRU of cached blocks) builds on
// the reference counts kept here.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::engine {

class BlockManager {
 public:
  BlockManager(int32_t num_blocks, int32_t block_size);

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return static_cast<int32_t>(ref_counts_.size()); }
  int32_t num_free() const { return static_cast<int32_t>(free_.size()); }
  int64_t blocks_for(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Grows `blocks` so it covers `num_tokens` tokens. All or nothing: returns false (and
  // changes nothing) when not enough blocks are free.
  bool ensure_capacity(std::vector<int32_t>& blocks, int64_t num_tokens);
  // Drops this holder's references; blocks whose count reaches zero become free.
  void release(std::vector<int32_t>& blocks);

 private:
  int32_t block_size_;
  std::vector<int32_t> ref_counts_;
  std::vector<int32_t> free_;  // stack; lowest ids handed out first
};

}  // namespace loom::engine
