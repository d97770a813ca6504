// The Qwen2.5-VL vision tower (transformers' Qwen2_5_VisionTransformerPretrainedModel), CPU path.
//
//   pixel_values [N, C*T*P*P] (processor order)
//     -> patch_embed: Conv3d with stride == kernel, i.e. one GEMM with the weight viewed [hidden, C*T*P*P]
//     -> window permutation of merge units (vision_window.h)
//     -> depth x block: x += proj(attn(rope(qkv(rms_norm1(x))))); x += down(silu(gate) * up)(rms_norm2(x))
//        attention is bidirectional inside variable-length segments: attention windows, or whole
//        frames for the blocks in fullatt_block_indexes
//     -> merger: rms_norm(ln_q), view [N/merge^2, merge^2*hidden], Linear, GELU (erf), Linear
//     -> reverse window permutation
//   returns [N/merge^2, out_hidden_size] f32 in processor order (one row per merged LLM token).
//
// Everything runs through ops::Ops (linear, rms_norm, add_rms_norm, rope, silu_mul, write_kv,
// paged_attention with causal=false). The 2D rotary embedding is expressed with the ordinary
// rope op: per-token cos/sin tables [N, head_dim/2] (h frequencies then w frequencies, each
// head_dim/4 wide) indexed by token row, rotary_dim = head_dim. Each attention segment is one
// "sequence" of a paged batch with block_size 1 (block b = token b). The window permutation, the
// split of the fused qkv and the merger's exact GELU are host loops over the tensors, so the tower
// needs a backend whose activations live in host memory (load() rejects others).
//
// Dump hook names: "vision.patch_embed" [N, hidden] (processor order), "vision.blk.<i>.out" [N, hidden]
// (WINDOW order, as transformers keeps its hidden states until the merger), "vision.merger"
// [N/merge^2, out_hidden] (processor order, the return value).
//
// Weights: "model.visual.*" (transformers 5) or "visual.*" (older Qwen2.5-VL checkpoints), f32/bf16/f16.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "models/checkpoint/checkpoint.h"
#include "models/model.h"
#include "models/qwen_vl/vision_config.h"
#include "ops/ops.h"

namespace loom::models::qwen_vl {

class Qwen25VisionTower {
 public:
  // NotFound when neither weight prefix is present or a weight is missing; InvalidArgument on a
  // weight whose shape disagrees with the config; Unsupported for a backend without host activations.
  static core::Expected<std::unique_ptr<Qwen25VisionTower>> load(const VisionConfig& config,
                                                                 const Checkpoint& checkpoint, ops::Ops& ops);

  // pixel_values [patches, C*T*P*P] f32 (the image processor's output, in its order); grids (t, h, w)
  // of each image/video in patches, in the same order. InvalidArgument when they disagree.
  core::Expected<core::Tensor> forward(const core::Tensor& pixel_values,
                                       std::span<const std::array<int64_t, 3>> grids,
                                       const DumpHook* dump = nullptr);

  const VisionConfig& config() const { return config_; }
  // "model.visual." or "visual.": the prefix the weights were found under.
  const std::string& weight_prefix() const { return prefix_; }

 private:
  struct Block {
    core::Tensor norm1, norm2;          // [hidden]
    core::Tensor qkv_w, qkv_b;          // [3*hidden, hidden], [3*hidden]: rows q | k | v, head-major
    core::Tensor proj_w, proj_b;        // [hidden, hidden], [hidden]
    core::Tensor gate_up_w, gate_up_b;  // [2*inter, hidden], [2*inter]: gate rows then up rows
    core::Tensor down_w, down_b;        // [hidden, inter], [hidden]
  };
  Qwen25VisionTower(const VisionConfig& config, ops::Ops& ops) : config_(config), ops_(ops) {}

  VisionConfig config_;
  ops::Ops& ops_;
  std::string prefix_;
  core::Tensor patch_w_;  // [hidden, C*T*P*P]
  std::vector<Block> blocks_;
  core::Tensor ln_q_;                   // [hidden]
  core::Tensor merger_w1_, merger_b1_;  // [merge^2*hidden, merge^2*hidden], [merge^2*hidden]
  core::Tensor merger_w2_, merger_b2_;  // [out_hidden, merge^2*hidden], [out_hidden]
  std::vector<float> inv_freq_;         // [head_dim/4] rope inverse frequencies
};

}  // namespace loom::models::qwen_vl
