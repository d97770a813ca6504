// The Qwen2.5-VL vision tower (transformers' Qwen2_5_VisionTransformerPretrainedModel), on any backend.
//
//   pixel_values [N, C*T*P*P] (processor order)
//     -> patch_embed: Conv3d with stride == kernel, i.e. one GEMM with the weight viewed [hidden, C*T*P*P]
//     -> window permutation of merge units (vision_window.h)
//     -> depth x block: x += proj(attn(rope(q, k), v)(rms_norm1(x))); x += down(silu(gate) *
//     up)(rms_norm2(x))
//        attention is bidirectional inside variable-length segments: attention windows, or whole
//        frames for the blocks in fullatt_block_indexes
//     -> merger: rms_norm(ln_q), view [N/merge^2, merge^2*hidden], Linear, GELU (erf), Linear
//     -> reverse window permutation
//   returns [N/merge^2, out_hidden_size] in processor order (one row per merged LLM token).
//
// Everything runs through ops::Ops, so the same code serves the CPU backends (f32) and CUDA (bf16):
// linear, rms_norm, add_rms_norm, rope, silu_mul, gelu, write_kv, paged_attention with causal=false,
// and embedding as the row gather of the window permutation and its inverse (one row per merge unit).
// The fused qkv projection is split at load into three linears (q, k, v come out contiguous, as
// rope / write_kv / paged_attention take them). The 2D rotary embedding is the ordinary rope op with
// per-token cos/sin tables [N, head_dim/2] (h frequencies then w frequencies, each head_dim/4 wide)
// built on the host each forward, uploaded with upload_scratch and indexed by token row,
// rotary_dim = head_dim. Each attention segment is one "sequence" of a paged batch with block_size 1
// (block b = token b). Index arrays (rows, window index, its inverse, segment tables) are announced
// once per forward through prepare_indices, so forward() starts a new forward on the backend: any
// empty() tensor of an earlier forward (of any model on the same Ops) is dead afterwards.
//
// Dump hook names: "vision.patch_embed" [N, hidden] (processor order), "vision.blk.<i>.out" [N, hidden]
// (WINDOW order, as transformers keeps its hidden states until the merger), "vision.merger"
// [N/merge^2, out_hidden] (processor order, the return value). Dumps are host copies (ops.to_host) in
// the activation dtype; they are only made when a hook is set (a device backend syncs for each).
//
// Weights: "model.visual.*" (transformers 5) or "visual.*" (older Qwen2.5-VL checkpoints), f32/bf16/f16;
// linears go through upload_weight (bf16 on CUDA), norm weights through upload.
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
#include "models/vision_common.h"
#include "ops/ops.h"

namespace loom::models::qwen_vl {

class Qwen25VisionTower {
 public:
  // NotFound when neither weight prefix is present or a weight is missing; InvalidArgument on a
  // weight whose shape disagrees with the config.
  static core::Expected<std::unique_ptr<Qwen25VisionTower>> load(const VisionConfig& config,
                                                                 const Checkpoint& checkpoint, ops::Ops& ops);

  // pixel_values [patches, C*T*P*P] host f32 (the image processor's output, in its order); grids
  // (t, h, w) of each image/video in patches, in the same order. InvalidArgument when they disagree.
  //
  // Returns [patches / merge^2, out_hidden_size] in ops.activation_dtype() on the backend's device
  // (f32 host memory on the CPU backends, bf16 device memory on CUDA). Lifetime: on host backends a
  // fresh tensor each call. On a device backend the result lives in a persistent buffer the tower
  // owns (ops.alloc, grown geometrically when a larger batch comes; the arena cannot free, so the
  // outgrown buffers stay reserved: at most about the final size again), not in per-forward scratch:
  // it survives later forwards of other models (the decoder's prepare_indices), but the next
  // forward() of this tower overwrites it. Copy it (or ops.to_host) to keep it longer.
  core::Expected<core::Tensor> forward(const core::Tensor& pixel_values,
                                       std::span<const std::array<int64_t, 3>> grids,
                                       const DumpHook* dump = nullptr);

  const VisionConfig& config() const { return config_; }
  // "model.visual." or "visual.": the prefix the weights were found under.
  const std::string& weight_prefix() const { return prefix_; }

 private:
  struct Block {
    core::Tensor norm1, norm2;          // [hidden]
    vision::AttentionWeights attn;      // split qkv and proj (vision_common.h)
    core::Tensor gate_up_w, gate_up_b;  // [2*inter, hidden], [2*inter]: gate rows then up rows
    core::Tensor down_w, down_b;        // [hidden, inter], [hidden]
  };
  Qwen25VisionTower(const VisionConfig& config, ops::Ops& ops) : config_(config), ops_(ops) {}

  VisionConfig config_;
  ops::Ops& ops_;
  std::string prefix_;
  core::Tensor patch_w_;      // [hidden, C*T*P*P]
  int64_t inter_padded_ = 0;  // intermediate_size rounded up to 64 (zero-padded MLP weights)
  std::vector<Block> blocks_;
  core::Tensor ln_q_;                   // [hidden]
  core::Tensor merger_w1_, merger_b1_;  // [merge^2*hidden, merge^2*hidden], [merge^2*hidden]
  core::Tensor merger_w2_, merger_b2_;  // [out_hidden, merge^2*hidden], [out_hidden]
  std::vector<float> inv_freq_;         // [head_dim/4] rope inverse frequencies
  vision::OutputBuffer out_buf_;        // the returned rows; see forward()
};

}  // namespace loom::models::qwen_vl
