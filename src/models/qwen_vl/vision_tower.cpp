#include "models/qwen_vl/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "core/check.h"
#include "core/dtype.h"

#include "models/qwen_vl/vision_window.h"
#include "models/vision_common.h"

namespace loom::models::qwen_vl {
namespace {

using core::DType;
using core::Shape;
using core::Tensor;

// transformers hard-codes eps 1e-6 for every RMSNorm of the vision tower (norm1, norm2, ln_q).
constexpr float kNormEps = 1e-6f;

// Rows [gate; up] stacked into one [2*inter, ...] tensor so one GEMM feeds silu_mul. Keeps the
// checkpoint dtype when both halves share it, else upcasts both to f32.
Tensor stack_rows(const Tensor& a, const Tensor& b) {
  const Tensor x = a.dtype() == b.dtype() ? a : a.to_f32();
  const Tensor y = a.dtype() == b.dtype() ? b : b.to_f32();
  Shape shape = x.shape();
  shape[0] += y.dim(0);
  Tensor out = Tensor::empty(shape, x.dtype());
  std::memcpy(out.data(), x.data(), x.nbytes());
  std::memcpy(static_cast<char*>(out.data()) + x.nbytes(), y.data(), y.nbytes());
  return out;
}

// A copy of a row-major [rows, cols] tensor with zero rows / columns appended up to [rows2, cols2].
Tensor zero_padded(const Tensor& t, int64_t rows2, int64_t cols2) {
  const int64_t rows = t.dim(0), cols = t.rank() == 2 ? t.dim(1) : 1;
  const size_t es = core::dtype_size(t.dtype());
  Tensor out = Tensor::empty(t.rank() == 2 ? Shape{rows2, cols2} : Shape{rows2}, t.dtype());
  std::memset(out.data(), 0, out.nbytes());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(r * cols2) * es,
                static_cast<const char*>(t.data()) + static_cast<size_t>(r * cols) * es,
                static_cast<size_t>(cols) * es);
  return out;
}

}  // namespace

core::Expected<std::unique_ptr<Qwen25VisionTower>> Qwen25VisionTower::load(const VisionConfig& config,
                                                                           const Checkpoint& ckpt,
                                                                           ops::Ops& ops) {
  std::unique_ptr<Qwen25VisionTower> tower(new Qwen25VisionTower(config, ops));
  LOOM_ASSIGN_OR_RETURN(const vision::TowerWeights weights, vision::TowerWeights::find(ckpt));
  tower->prefix_ = weights.prefix();
  tower->inter_padded_ = (config.intermediate_size + 63) / 64 * 64;
  auto get = [&](const std::string& name, const Shape& shape) { return weights.get(name, shape); };

  const int64_t hidden = config.hidden_size, inter = config.intermediate_size;
  const int64_t merged = hidden * config.merge_unit();
  LOOM_ASSIGN_OR_RETURN(
      Tensor patch, get("patch_embed.proj.weight", {hidden, config.in_channels, config.temporal_patch_size,
                                                    config.patch_size, config.patch_size}));
  // Conv3d with stride == kernel over one patch == dot product with the flattened kernel.
  tower->patch_w_ = ops.upload_weight(patch.reshape({hidden, config.patch_dim()}));

  for (int64_t i = 0; i < config.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    Block blk;
    LOOM_ASSIGN_OR_RETURN(Tensor n1, get(b + "norm1.weight", {hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor n2, get(b + "norm2.weight", {hidden}));
    LOOM_ASSIGN_OR_RETURN(blk.attn, vision::load_attention(weights, ops, b, hidden));
    LOOM_ASSIGN_OR_RETURN(Tensor gate_w, get(b + "mlp.gate_proj.weight", {inter, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor gate_b, get(b + "mlp.gate_proj.bias", {inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor up_w, get(b + "mlp.up_proj.weight", {inter, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor up_b, get(b + "mlp.up_proj.bias", {inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor down_w, get(b + "mlp.down_proj.weight", {hidden, inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor down_b, get(b + "mlp.down_proj.bias", {hidden}));
    blk.norm1 = ops.upload(n1);
    blk.norm2 = ops.upload(n2);
    // The MLP width is padded with zero rows (gate/up) and columns (down) to a multiple of 64
    // (Qwen2.5-VL's 3420 is not even a multiple of 8, which leaves cuBLASLt 8-byte-aligned rows
    // and slow kernels). silu(0) * 0 = 0 and zero columns add exact zeros, so values are unchanged.
    const int64_t ip = tower->inter_padded_;
    blk.gate_up_w =
        ops.upload_weight(stack_rows(zero_padded(gate_w, ip, hidden), zero_padded(up_w, ip, hidden)));
    blk.gate_up_b = ops.upload_weight(stack_rows(zero_padded(gate_b, ip, 1), zero_padded(up_b, ip, 1)));
    blk.down_w = ops.upload_weight(ip == inter ? down_w : zero_padded(down_w, hidden, ip));
    blk.down_b = ops.upload_weight(down_b);
    tower->blocks_.push_back(std::move(blk));
  }

  LOOM_ASSIGN_OR_RETURN(Tensor ln_q, get("merger.ln_q.weight", {hidden}));
  LOOM_ASSIGN_OR_RETURN(Tensor w1, get("merger.mlp.0.weight", {merged, merged}));
  LOOM_ASSIGN_OR_RETURN(Tensor b1, get("merger.mlp.0.bias", {merged}));
  LOOM_ASSIGN_OR_RETURN(Tensor w2, get("merger.mlp.2.weight", {config.out_hidden_size, merged}));
  LOOM_ASSIGN_OR_RETURN(Tensor b2, get("merger.mlp.2.bias", {config.out_hidden_size}));
  tower->ln_q_ = ops.upload(ln_q);
  tower->merger_w1_ = ops.upload_weight(w1);
  tower->merger_b1_ = ops.upload_weight(b1);
  tower->merger_w2_ = ops.upload_weight(w2);
  tower->merger_b2_ = ops.upload_weight(b2);

  tower->inv_freq_ = vision::axial_inv_freq(config.head_dim(), config.rope_theta);
  return tower;
}

core::Expected<Tensor> Qwen25VisionTower::forward(const Tensor& pixel_values,
                                                  std::span<const std::array<int64_t, 3>> grids,
                                                  const DumpHook* dump) {
  const VisionConfig& c = config_;
  LOOM_ASSIGN_OR_RETURN(VisionLayout layout, make_vision_layout(c, grids));
  LOOM_RETURN_IF_ERROR(vision::check_pixel_values(pixel_values, layout.num_patches, c.patch_dim()));
  const int64_t n = layout.num_patches, hidden = c.hidden_size, heads = c.num_heads, hd = c.head_dim();
  const int64_t unit = c.merge_unit(), units = layout.num_units;
  const int64_t merged = hidden * unit;
  const DType act = ops_.activation_dtype();
  const vision::DumpEmitter emit(ops_, dump);

  // Index arrays: token rows (rope table rows and identity KV slots), the window permutation of
  // merge units and its inverse, both segmentations.
  const std::vector<int32_t> rows = vision::identity_rows(n);
  std::vector<int32_t> unwindow(units);  // processor unit u sits at window-order row unwindow[u]
  for (int64_t j = 0; j < units; ++j) unwindow[layout.window_index[j]] = static_cast<int32_t>(j);
  const vision::SegmentAttention windows(layout.cu_window_seqlens);
  const vision::SegmentAttention frames(layout.cu_seqlens);
  ops_.prepare_indices({rows, layout.window_index, unwindow, windows.q_indptr, windows.kv_lens,
                        windows.block_table, frames.q_indptr, frames.kv_lens, frames.block_table});

  // patch_embed: [N, C*T*P*P] @ [hidden, C*T*P*P]^T -> [N, hidden] (processor order).
  const Tensor px = ops_.upload_scratch(vision::host_as(pixel_values, act));
  Tensor embed = ops_.empty({n, hidden}, act);
  ops_.linear(px, patch_w_, Tensor(), embed);
  emit("vision.patch_embed", embed);

  // x [N, hidden] in window order: unit j <- processor unit window_index[j] (a row gather over
  // [units, merge^2 * hidden]).
  Tensor x = ops_.empty({n, hidden}, act);
  {
    Tensor x_units = x.reshape({units, unit * hidden});
    ops_.embedding(embed.reshape({units, unit * hidden}), layout.window_index, x_units);
  }

  // Per-token rope tables [N, hd/2]: angles h*inv_freq then w*inv_freq (f32 products, as transformers).
  const vision::AxialRope rope = vision::upload_axial_rope(ops_, layout.pos_h, layout.pos_w, inv_freq_, hd);

  Tensor h = ops_.empty({n, hidden}, act);
  vision::AttentionScratch scratch(ops_, n, heads, hd, act);
  Tensor gate_up = ops_.empty({n, 2 * inter_padded_}, act);
  Tensor mlp_act = ops_.empty({n, inter_padded_}, act);
  Tensor mlp = ops_.empty({n, hidden}, act);

  for (int64_t b = 0; b < c.depth; ++b) {
    const Block& blk = blocks_[b];
    ops_.rms_norm(x, blk.norm1, kNormEps, h);
    const vision::SegmentAttention& segs = c.is_full_attention(b) ? frames : windows;
    vision::attention(ops_, h, blk.attn, rows, rope, segs.params(rope.scale), scratch);
    // x += proj; h = rms_norm2(x)
    ops_.add_rms_norm(x, scratch.proj, blk.norm2, kNormEps, h);
    ops_.linear(h, blk.gate_up_w, blk.gate_up_b, gate_up);
    ops_.silu_mul(gate_up, mlp_act);
    ops_.linear(mlp_act, blk.down_w, blk.down_b, mlp);
    ops_.add_inplace(x, mlp);
    if (emit.active()) emit("vision.blk." + std::to_string(b) + ".out", x);
  }

  // Merger: ln_q, then each unit's merge^2 rows side by side -> [units, merge^2 * hidden].
  ops_.rms_norm(x, ln_q_, kNormEps, h);
  Tensor m1 = ops_.empty({units, merged}, act);
  ops_.linear(h.reshape({units, merged}), merger_w1_, merger_b1_, m1);
  ops_.gelu(m1, m1, /*tanh_approx=*/false);  // nn.GELU(): exact erf form
  Tensor m2 = ops_.empty({units, c.out_hidden_size}, act);
  ops_.linear(m1, merger_w2_, merger_b2_, m2);

  // Undo the window order (processor unit u <- window-order row unwindow[u]) into memory that
  // outlives this forward's scratch (see the header).
  out_buf_.begin(ops_, m2.device() == core::Device::kCpu, 1, units, c.out_hidden_size, act);
  Tensor out = out_buf_.get(0);
  ops_.embedding(m2, unwindow, out);
  emit("vision.merger", out);
  return out;
}

}  // namespace loom::models::qwen_vl
