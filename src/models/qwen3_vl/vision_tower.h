// The Qwen3-VL vision tower (transformers 5.24's Qwen3VLVisionModel; Qwen3VLMoeVisionModel is the
// same), CPU path, with its DeepStack outputs.
//
//   pixel_values [N, C*T*P*P] (processor order)
//     -> patch_embed: Conv3d (with bias) with stride == kernel, i.e. one linear with the weight viewed
//        [hidden, C*T*P*P]
//     -> + learned position embeddings [side*side, hidden] resampled bilinearly (align_corners) to
//        each grid (vision_layout.h; f32 op for op as transformers)
//     -> depth x block: x += proj(attn(rope(qkv(layer_norm1(x)))));
//                       x += fc2(gelu_tanh(fc1(layer_norm2(x))))
//        attention is bidirectional within each frame (cu_seqlens); no window attention
//     -> after block b in deepstack_visual_indexes (slot k): deepstack merger k:
//        view [N/merge^2, merge^2*hidden], layer_norm over merge^2*hidden (postshuffle), fc1, GELU (erf), fc2
//     -> merger: layer_norm over hidden (pre-shuffle), view [N/merge^2, merge^2*hidden], fc1, GELU (erf), fc2
//   returns [N/merge^2, out_hidden_size] f32 plus one [N/merge^2, out_hidden_size] per deepstack
//   index, all in processor order (one row per merged LLM token).
//
// Everything heavy runs through ops::Ops (linear, layer_norm, gelu, add_inplace, rope, write_kv,
// paged_attention with causal=false). The 2D rotary embedding is the ordinary rope op with per-token
// cos/sin tables [N, head_dim/2] (h frequencies then w frequencies, head_dim/4 each) indexed by token
// row, rotary_dim = head_dim. Each frame is one "sequence" of a paged batch with block_size 1 (block b
// = token b). The position-embedding interpolation and the split of the fused qkv are host loops, so
// the tower needs a backend whose activations live in host memory (load() rejects others).
//
// Dump hook names: "vision.patch_embed" [N, hidden] (Conv3d output), "vision.embed" [N, hidden]
// (+ pos embeds, the input of block 0), "vision.blk.<i>.out" [N, hidden], "vision.deepstack.<k>"
// [N/merge^2, out_hidden], "vision.merger" [N/merge^2, out_hidden]; all in processor order.
//
// Weights: "model.visual.*" (transformers 5 and the released Qwen3-VL checkpoints) or "visual.*"
// (transformers 4 style), f32/bf16/f16.
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
#include "models/qwen3_vl/vision_config.h"
#include "ops/ops.h"

namespace loom::models::qwen3_vl {

struct VisionOutput {
  core::Tensor embeds;                  // [N/merge^2, out_hidden] f32: the merger output
  std::vector<core::Tensor> deepstack;  // one [N/merge^2, out_hidden] f32 per deepstack index, in
                                        // block order (= config order when it is sorted, as shipped)
};

class Qwen3VisionTower {
 public:
  // NotFound when neither weight prefix is present or a weight is missing; InvalidArgument on a
  // weight whose shape disagrees with the config; Unsupported for a backend without host activations.
  static core::Expected<std::unique_ptr<Qwen3VisionTower>> load(const VisionConfig& config,
                                                                const Checkpoint& checkpoint, ops::Ops& ops);

  // pixel_values [patches, C*T*P*P] f32 (the image/video processor's output, in its order); grids
  // (t, h, w) of each image/video in patches, in the same order. InvalidArgument when they disagree.
  core::Expected<VisionOutput> forward(const core::Tensor& pixel_values,
                                       std::span<const std::array<int64_t, 3>> grids,
                                       const DumpHook* dump = nullptr);

  const VisionConfig& config() const { return config_; }
  // "model.visual." or "visual.": the prefix the weights were found under.
  const std::string& weight_prefix() const { return prefix_; }

 private:
  struct Block {
    core::Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // [hidden]
    core::Tensor qkv_w, qkv_b;                        // [3*hidden, hidden], [3*hidden]: rows q | k | v
    core::Tensor proj_w, proj_b;                      // [hidden, hidden], [hidden]
    core::Tensor fc1_w, fc1_b;                        // [inter, hidden], [inter]
    core::Tensor fc2_w, fc2_b;                        // [hidden, inter], [hidden]
  };
  struct Merger {
    bool postshuffle = false;     // norm over merge^2*hidden after the view, else over hidden before
    core::Tensor norm_w, norm_b;  // [hidden] or [merge^2*hidden]
    core::Tensor fc1_w, fc1_b;    // [merge^2*hidden, merge^2*hidden], [merge^2*hidden]
    core::Tensor fc2_w, fc2_b;    // [out_hidden, merge^2*hidden], [out_hidden]
  };
  Qwen3VisionTower(const VisionConfig& config, ops::Ops& ops) : config_(config), ops_(ops) {}
  static core::Expected<Merger> load_merger(const VisionConfig& c, const Checkpoint& ckpt, ops::Ops& ops,
                                            const std::string& prefix, bool postshuffle);
  // x [N, hidden] -> [N/merge^2, out_hidden].
  core::Tensor run_merger(const Merger& m, const core::Tensor& x);

  VisionConfig config_;
  ops::Ops& ops_;
  std::string prefix_;
  core::Tensor patch_w_, patch_b_;  // [hidden, C*T*P*P], [hidden]
  std::vector<float> pos_table_;    // [num_position_embeddings, hidden] f32 (host)
  std::vector<Block> blocks_;
  Merger merger_;
  std::vector<Merger> deepstack_;  // one per deepstack_visual_indexes entry, same order
  std::vector<float> inv_freq_;    // [head_dim/4] rope inverse frequencies
};

}  // namespace loom::models::qwen3_vl
