// Qwen2.5-VL vision tower configuration: the "vision_config" object of a Qwen2.5-VL config.json.
// Absent fields take transformers 5's Qwen2_5_VLVisionConfig defaults; "in_chans" (older
// checkpoints) is accepted for in_channels. Validated once here: every forward relies on
//   hidden_size % num_heads == 0, head_dim % 4 == 0 (2D rope splits head_dim/2 into h and w halves),
//   window_size / spatial_merge_size / patch_size >= 1 (merged units per window side),
//   fullatt_block_indexes within [0, depth), hidden_act == "silu".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom::models::qwen_vl {

struct VisionConfig {
  int64_t depth = 32;
  int64_t hidden_size = 3584;
  int64_t intermediate_size = 3420;
  int64_t num_heads = 16;
  int64_t in_channels = 3;
  int64_t patch_size = 14;
  int64_t spatial_merge_size = 2;
  int64_t temporal_patch_size = 2;
  int64_t window_size = 112;
  int64_t out_hidden_size = 3584;
  std::vector<int64_t> fullatt_block_indexes = {7, 15, 23, 31};
  std::string hidden_act = "silu";
  double rope_theta = 10000.0;  // rope_parameters.rope_theta

  int64_t head_dim() const { return hidden_size / num_heads; }
  // in_channels * temporal_patch_size * patch_size^2: one row of pixel_values.
  int64_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  // Side of an attention window in merged units (transformers' vit_merger_window_size).
  int64_t window_units() const { return window_size / spatial_merge_size / patch_size; }
  bool is_full_attention(int64_t block) const;
};

core::Expected<VisionConfig> parse_vision_config(const nlohmann::json& vision_config);

}  // namespace loom::models::qwen_vl
