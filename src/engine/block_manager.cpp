#include "engine/block_manager.h"

#include "core/check.h"

namespace loom::engine {

BlockManager::BlockManager(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), ref_counts_(static_cast<size_t>(num_blocks), 0) {
  LOOM_CHECK(num_blocks > 0 && block_size > 0) << num_blocks << " blocks of " << block_size;
  free_.reserve(static_cast<size_t>(num_blocks));
  for (int32_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

bool BlockManager::ensure_capacity(std::vector<int32_t>& blocks, int64_t num_tokens) {
  const int64_t need = blocks_for(num_tokens) - static_cast<int64_t>(blocks.size());
  if (need <= 0) return true;
  if (need > static_cast<int64_t>(free_.size())) return false;
  for (int64_t i = 0; i < need; ++i) {
    int32_t b = free_.back();
    free_.pop_back();
    LOOM_CHECK(ref_counts_[static_cast<size_t>(b)] == 0) << "free block " << b << " is referenced";
    ref_counts_[static_cast<size_t>(b)] = 1;
    blocks.push_back(b);
  }
  return true;
}

void BlockManager::release(std::vector<int32_t>& blocks) {
  for (int32_t b : blocks) {
    int32_t& rc = ref_counts_[static_cast<size_t>(b)];
    LOOM_CHECK(rc > 0) << "double release of block " << b;
    if (--rc == 0) free_.push_back(b);
  }
  blocks.clear();
}

}  // namespace loom::engine
