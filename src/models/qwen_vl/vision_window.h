// Token layout of the Qwen2.5-VL vision tower for a batch of grids (transformers'
// get_vision_position_ids, get_vision_attention_seqlens and get_vision_window_index).
//
// Patches arrive in the processor's order: per image, per frame t, merge blocks (bh, bw) row-major,
// then the merge_size x merge_size patches of a block row-major. A "unit" is one merge block
// (merge_size^2 consecutive patches). Window attention reorders units so that each window of
// window_units x window_units units (clipped at the grid's right/bottom edge) is contiguous;
// the tower runs every block in that window order and undoes it after the merger.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "models/qwen_vl/vision_config.h"

namespace loom::models::qwen_vl {

struct VisionLayout {
  int64_t num_patches = 0;  // sum t*h*w
  int64_t num_units = 0;    // num_patches / merge_unit
  // window_index[j] = processor-order unit placed at window-order position j ([num_units]).
  std::vector<int32_t> window_index;
  // Window-order patch boundaries of each attention window ([windows + 1], empty windows dropped).
  std::vector<int32_t> cu_window_seqlens;
  // Window-order patch boundaries of each frame (full attention; one segment per frame) ([frames + 1]).
  std::vector<int32_t> cu_seqlens;
  // 2D rope positions of each patch, in window order ([num_patches] each).
  std::vector<int32_t> pos_h;
  std::vector<int32_t> pos_w;
};

// InvalidArgument for a non-positive grid entry or h/w not divisible by spatial_merge_size.
core::Expected<VisionLayout> make_vision_layout(const VisionConfig& config,
                                                std::span<const std::array<int64_t, 3>> grids);

}  // namespace loom::models::qwen_vl
