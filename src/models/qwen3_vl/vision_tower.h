// The Qwen3-VL vision tower (transformers 5.24's Qwen3VLVisionModel; Qwen3VLMoeVisionModel is the
// same) with its DeepStack outputs, on any backend.
//
//   pixel_values [N, C*T*P*P] (processor order)
//     -> patch_embed: Conv3d (with bias) with stride == kernel, i.e. one linear with the weight viewed
//        [hidden, C*T*P*P]
//     -> + learned position embeddings [side*side, hidden] resampled bilinearly (align_corners) to
//        each grid (vision_layout.h)
//     -> depth x block: x += proj(attn(rope(q, k), v)(layer_norm1(x)));
//                       x += fc2(gelu_tanh(fc1(layer_norm2(x))))
//        attention is bidirectional within each frame (cu_seqlens); no window attention
//     -> after block b in deepstack_visual_indexes (slot k): deepstack merger k:
//        view [N/merge^2, merge^2*hidden], layer_norm over merge^2*hidden (postshuffle), fc1, GELU (erf), fc2
//     -> merger: layer_norm over hidden (pre-shuffle), view [N/merge^2, merge^2*hidden], fc1, GELU (erf), fc2
//   returns [N/merge^2, out_hidden_size] plus one [N/merge^2, out_hidden_size] per deepstack index,
//   all in processor order (one row per merged LLM token).
//
// Everything runs through ops::Ops, so the same code serves the CPU backends (f32) and CUDA (bf16):
// linear, layer_norm, gelu, add_inplace, rope, write_kv, paged_attention with causal=false, and
// embedding as a row gather over an activation table. The fused qkv projection is split at load into
// three linears (q, k, v come out contiguous, as rope / write_kv / paged_attention take them). The 2D
// rotary embedding is the ordinary rope op with per-token cos/sin tables [N, head_dim/2] (h
// frequencies then w frequencies, head_dim/4 each) built on the host each forward, uploaded with
// upload_scratch and indexed by token row, rotary_dim = head_dim. Each frame is one "sequence" of a
// paged batch with block_size 1 (block b = token b).
//
// Position embeddings: bilinear interpolation is separable, so for a grid (h, w) the interpolated
// table is H [h, side] . E [side, side, hidden] . W [w, side]^T, with H and W the per-axis weight
// matrices (vision_layout.h's axis_interpolation: taps and f32 weights computed on the host, padded
// to K = side rounded up to 8 with zeros so device GEMMs see aligned rows). Two linears per forward
// apply it on the device: Y [sum w, hidden*K] = W_all . E' ^T with E' the table stored at load as
// [hidden*K, K] (E'[c*K + i, j] = E[i, j, c]); then per distinct (h, w):
// Z [h, w*hidden] = H . (Y rows of that grid viewed [w*hidden, K])^T, i.e. Z is the raster-ordered
// [h*w, hidden] table of the grid. One embedding gather (layout.pos_row) brings it to processor
// order for every frame, and add_inplace adds it to the patch embeddings. On the CPU this differs
// from transformers' four-tap f32 sum only in rounding order (a few ulp); on CUDA the weights and the
// intermediate Y are bf16, as transformers in bf16 also keeps its tap weights in the model dtype.
//
// Index arrays (rows, segment tables, pos_row) are announced once per forward through
// prepare_indices, so forward() starts a new forward on the backend: any empty() tensor of an
// earlier forward (of any model on the same Ops) is dead afterwards.
//
// Dump hook names: "vision.patch_embed" [N, hidden] (Conv3d output), "vision.embed" [N, hidden]
// (+ pos embeds, the input of block 0), "vision.blk.<i>.out" [N, hidden], "vision.deepstack.<k>"
// [N/merge^2, out_hidden], "vision.merger" [N/merge^2, out_hidden]; all in processor order. Dumps are
// host copies (ops.to_host) in the activation dtype; they are only made when a hook is set (a device
// backend syncs for each).
//
// Weights: "model.visual.*" (transformers 5 and the released Qwen3-VL checkpoints) or "visual.*"
// (transformers 4 style), f32/bf16/f16; linears (and the pos table) go through upload_weight (bf16 on
// CUDA), norm weights through upload.
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
#include "models/qwen3_vl/vision_layout.h"
#include "models/vision_common.h"
#include "ops/ops.h"

namespace loom::models::qwen3_vl {

// Tensors in ops.activation_dtype() on the backend's device; see Qwen3VisionTower::forward for their
// lifetime.
struct VisionOutput {
  core::Tensor embeds;                  // [N/merge^2, out_hidden]: the merger output
  std::vector<core::Tensor> deepstack;  // one [N/merge^2, out_hidden] per deepstack index, in
                                        // block order (= config order when it is sorted, as shipped)
};

class Qwen3VisionTower {
 public:
  // NotFound when neither weight prefix is present or a weight is missing; InvalidArgument on a
  // weight whose shape disagrees with the config.
  static core::Expected<std::unique_ptr<Qwen3VisionTower>> load(const VisionConfig& config,
                                                                const Checkpoint& checkpoint, ops::Ops& ops);

  // pixel_values [patches, C*T*P*P] host f32 (the image/video processor's output, in its order); grids
  // (t, h, w) of each image/video in patches, in the same order. InvalidArgument when they disagree.
  //
  // The outputs are in ops.activation_dtype() on the backend's device (f32 host memory on the CPU
  // backends, bf16 device memory on CUDA). Lifetime: on host backends fresh tensors each call. On a
  // device backend they live in a persistent buffer the tower owns (ops.alloc, grown geometrically
  // when a larger batch comes; the arena cannot free, so outgrown buffers stay reserved: at most
  // about the final size again), not in per-forward scratch: they survive later forwards of other
  // models (the decoder's prepare_indices), but the next forward() of this tower overwrites them.
  // Copy them (or ops.to_host) to keep them longer.
  core::Expected<VisionOutput> forward(const core::Tensor& pixel_values,
                                       std::span<const std::array<int64_t, 3>> grids,
                                       const DumpHook* dump = nullptr);

  const VisionConfig& config() const { return config_; }
  // "model.visual." or "visual.": the prefix the weights were found under.
  const std::string& weight_prefix() const { return prefix_; }

 private:
  struct Block {
    core::Tensor norm1_w, norm1_b, norm2_w, norm2_b;  // [hidden]
    vision::AttentionWeights attn;                    // split qkv and proj (vision_common.h)
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
  static core::Expected<Merger> load_merger(const VisionConfig& c, const vision::TowerWeights& weights,
                                            ops::Ops& ops, const std::string& prefix, bool postshuffle);
  // x [N, hidden] -> out [N/merge^2, out_hidden].
  void run_merger(const Merger& m, const core::Tensor& x, core::Tensor& out);
  // x [N, hidden] += the interpolated position embeddings of `layout`'s grids.
  void add_pos_embed(const VisionLayout& layout, core::Tensor& x);

  VisionConfig config_;
  ops::Ops& ops_;
  std::string prefix_;
  core::Tensor patch_w_, patch_b_;  // [hidden, C*T*P*P], [hidden]
  int64_t pos_k_ = 0;               // side rounded up to a multiple of 8
  core::Tensor pos_table_;          // [hidden * pos_k_, pos_k_]: E'[c*K + i, j] = pos_embed[i*side + j, c]
  std::vector<Block> blocks_;
  Merger merger_;
  std::vector<Merger> deepstack_;  // one per deepstack_visual_indexes entry, same order
  std::vector<float> inv_freq_;    // [head_dim/4] rope inverse frequencies
  vision::OutputBuffer out_buf_;   // merger output, then one block per deepstack merger; see forward()
};

}  // namespace loom::models::qwen3_vl
