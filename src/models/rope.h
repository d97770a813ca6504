// Rotary-embedding tables computed exactly as transformers' rope init functions do
// (modeling_rope_utils: default, linear, yarn, llama3), in f32.
#pragma once

#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "models/config/model_config.h"

namespace loom::models {

struct RopeTables {
  core::Tensor cos;  // [max_positions, rotary_dim / 2] f32, already times attention_factor
  core::Tensor sin;  // [max_positions, rotary_dim / 2]
  int32_t rotary_dim = 0;
  int64_t max_positions = 0;
};

// inv_freq [rotary_dim / 2] and the attention factor for `rope` over `head_dim`.
core::Status rope_inv_freq(const RopeConfig& rope, int64_t head_dim, int64_t max_position_embeddings,
                           std::vector<float>* inv_freq, float* attention_factor);

core::Expected<RopeTables> make_rope_tables(const RopeConfig& rope, int64_t head_dim,
                                            int64_t max_position_embeddings, int64_t max_positions);

}  // namespace loom::models
