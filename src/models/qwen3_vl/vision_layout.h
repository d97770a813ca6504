// Token layout of the Qwen3-VL vision tower for a batch of grids: transformers 5.24's
// get_vision_position_ids, get_vision_attention_seqlens and
// get_vision_interpolation_indices_and_weights (bilinear, align_corners=True, border padding),
// computed on the host.
//
// Patches arrive in the processor's order: per image/video, per frame t, merge blocks (bh, bw)
// row-major, then the merge_size x merge_size patches of a block row-major. Unlike Qwen2.5-VL there
// is no window attention: every block attends within whole frames and the hidden states stay in
// processor order throughout.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "models/qwen3_vl/vision_config.h"

namespace loom::models::qwen3_vl {

// Bilinear taps of one patch into the flattened side x side learned position table: tap k =
// (a, b) for k = 2a + b reads row h_tap[a] * side + w_tap[b] with weight h_weight[a] * w_weight[b]
// (f32 products, transformers' outer-product order).
inline constexpr int kPosTaps = 4;

struct VisionLayout {
  int64_t num_patches = 0;  // sum t*h*w
  int64_t num_units = 0;    // num_patches / merge_unit
  // Patch boundaries of each frame ([frames + 1]): one bidirectional attention segment per frame.
  std::vector<int32_t> cu_seqlens;
  // 2D rope positions (row, column in patches) of each patch ([num_patches] each).
  std::vector<int32_t> pos_h;
  std::vector<int32_t> pos_w;
  // Position-embedding interpolation ([num_patches * kPosTaps] each).
  std::vector<int32_t> pos_index;
  std::vector<float> pos_weight;
};

// InvalidArgument for no grids, a non-positive grid entry, h/w not divisible by
// spatial_merge_size, or more patches than int32 indices address.
core::Expected<VisionLayout> make_vision_layout(const VisionConfig& config,
                                                std::span<const std::array<int64_t, 3>> grids);

// pos [num_patches, hidden] = sum_k table[pos_index[p, k]] * pos_weight[p, k], summed in tap order
// in f32 from 0 (as transformers' (pos_embed(idx) * w[..., None]).sum(1) does): bit-exact.
// table: [side*side or more, hidden] f32 rows.
void interpolate_pos_embed(const VisionLayout& layout, const float* table, int64_t hidden, float* pos);

}  // namespace loom::models::qwen3_vl
