// Qwen3-VL vision tower configuration: the "vision_config" object of a Qwen3-VL / Qwen3-VL-MoE
// config.json (transformers' Qwen3VLVisionConfig / Qwen3VLMoeVisionConfig, identical fields).
// Absent fields take transformers 5.24's defaults. Validated once here; every forward relies on
//   all sizes positive, hidden_size % num_heads == 0, head_dim % 4 == 0 (the 2D rope splits
//   head_dim/2 into h and w halves), num_position_embeddings >= 1 (a side x side learned grid,
//   side = floor(sqrt(n)) as transformers' int(n ** 0.5)), deepstack_visual_indexes distinct and
//   within [0, depth), hidden_act "gelu_pytorch_tanh" (or "gelu"), rope_type "axial".
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom::models::qwen3_vl {

struct VisionConfig {
  int64_t depth = 27;
  int64_t hidden_size = 1152;
  int64_t intermediate_size = 4304;
  int64_t num_heads = 16;
  int64_t in_channels = 3;
  int64_t patch_size = 16;
  int64_t spatial_merge_size = 2;
  int64_t temporal_patch_size = 2;
  int64_t out_hidden_size = 3584;
  int64_t num_position_embeddings = 2304;
  std::vector<int64_t> deepstack_visual_indexes = {8, 16, 24};
  std::string hidden_act = "gelu_pytorch_tanh";
  double rope_theta = 10000.0;  // rope_parameters.rope_theta

  int64_t head_dim() const { return hidden_size / num_heads; }
  // in_channels * temporal_patch_size * patch_size^2: one row of pixel_values.
  int64_t patch_dim() const { return in_channels * temporal_patch_size * patch_size * patch_size; }
  int64_t merge_unit() const { return spatial_merge_size * spatial_merge_size; }
  // Side of the square learned position grid (transformers' num_grid_per_side).
  int64_t num_grid_per_side() const;
  // The block MLP's activation: true for the tanh approximation ("gelu_pytorch_tanh").
  bool mlp_gelu_tanh() const { return hidden_act != "gelu"; }
  // Position of `block` in deepstack_visual_indexes (which deepstack merger it feeds), or -1.
  int64_t deepstack_slot(int64_t block) const;
};

core::Expected<VisionConfig> parse_vision_config(const nlohmann::json& vision_config);

}  // namespace loom::models::qwen3_vl
