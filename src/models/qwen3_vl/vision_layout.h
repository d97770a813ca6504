// Token layout of the Qwen3-VL vision tower for a batch of grids: transformers 5.24's
// get_vision_position_ids, get_vision_attention_seqlens and
// get_vision_interpolation_indices_and_weights (bilinear, align_corners=True, border padding),
// computed on the host, plus the separable form of that interpolation the tower applies on the
// device (two small GEMMs per distinct grid size, then a row gather; see axis_interpolation).
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
  // The same interpolation, separable: the distinct (h, w) of the grids in first-seen order (frames
  // and images of one size share their interpolated table), and for each patch the row of its
  // value in those tables stacked in that order, each raster-ordered [h * w, hidden]:
  // pos_row[p] = offset of the grid's table + row * w + column ([num_patches]).
  std::vector<std::array<int64_t, 2>> pos_grids;
  std::vector<int32_t> pos_row;
};

// InvalidArgument for no grids, a non-positive grid entry, h/w not divisible by
// spatial_merge_size, or more patches than int32 indices address.
core::Expected<VisionLayout> make_vision_layout(const VisionConfig& config,
                                                std::span<const std::array<int64_t, 3>> grids);

// The bilinear weights of one axis as a dense matrix: out[i * stride + s] (i < size, s < stride) is
// the weight of table row/column s for output index i: the two taps' f32 weights of
// pos_index/pos_weight (added where the border clamp makes both taps the same index), 0 elsewhere
// and in the padding columns [side, stride). Row r of a grid then reads
// sum_{s, s'} H[r, s] * W[c, s'] * table[s * side + s'], which equals the four-tap sum.
void axis_interpolation(int64_t size, int64_t side, int64_t stride, float* out);

}  // namespace loom::models::qwen3_vl
