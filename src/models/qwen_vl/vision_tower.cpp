#include "models/qwen_vl/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

#include "core/check.h"
#include "core/dtype.h"

#include "models/qwen_vl/vision_window.h"

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

// A host f32 tensor rounded to `dtype` (f32: itself), RNE as torch's .to(dtype).
Tensor host_as(const Tensor& f32, DType dtype) {
  if (dtype == DType::kF32) return f32;
  LOOM_CHECK(dtype == DType::kBF16 || dtype == DType::kF16)
      << "unsupported activation dtype " << core::dtype_name(dtype);
  Tensor out = Tensor::empty(f32.shape(), dtype);
  const float* src = f32.data_as<float>();
  auto* dst = out.data_as<uint16_t>();
  for (int64_t i = 0; i < f32.numel(); ++i)
    dst[i] = dtype == DType::kBF16 ? core::f32_to_bf16(src[i]) : core::f32_to_f16(src[i]);
  return out;
}

// Bidirectional attention over segments [cu[s], cu[s+1]) of a block_size-1 paged cache whose
// block b holds token b: sequence s reads blocks cu[s] .. cu[s+1]-1.
struct SegmentAttention {
  std::vector<int32_t> q_indptr, kv_lens, block_table;
  int32_t max_len = 0;

  explicit SegmentAttention(const std::vector<int32_t>& cu) : q_indptr(cu) {
    const size_t segs = cu.size() - 1;
    for (size_t s = 0; s < segs; ++s) max_len = std::max(max_len, cu[s + 1] - cu[s]);
    kv_lens.resize(segs);
    block_table.assign(segs * static_cast<size_t>(max_len), 0);
    for (size_t s = 0; s < segs; ++s) {
      kv_lens[s] = cu[s + 1] - cu[s];
      for (int32_t j = 0; j < kv_lens[s]; ++j) block_table[s * max_len + j] = cu[s] + j;
    }
  }
  ops::PagedAttentionParams params(float scale) const {
    ops::PagedAttentionParams p;
    p.q_indptr = q_indptr;
    p.kv_lens = kv_lens;
    p.block_table = block_table;
    p.max_blocks_per_seq = max_len;
    p.block_size = 1;
    p.scale = scale;
    p.causal = false;
    return p;
  }
};

}  // namespace

core::Expected<std::unique_ptr<Qwen25VisionTower>> Qwen25VisionTower::load(const VisionConfig& config,
                                                                           const Checkpoint& ckpt,
                                                                           ops::Ops& ops) {
  std::unique_ptr<Qwen25VisionTower> tower(new Qwen25VisionTower(config, ops));
  for (const char* prefix : {"model.visual.", "visual."}) {
    if (ckpt.has(std::string(prefix) + "patch_embed.proj.weight")) {
      tower->prefix_ = prefix;
      break;
    }
  }
  if (tower->prefix_.empty()) {
    return core::not_found(
        "no vision tower weights: neither model.visual.patch_embed.proj.weight nor "
        "visual.patch_embed.proj.weight is in the checkpoint");
  }
  const std::string& pre = tower->prefix_;
  auto get = [&](const std::string& name, const Shape& shape) -> core::Expected<Tensor> {
    auto t = ckpt.get(pre + name, shape);
    if (!t.ok()) return t.status().with_context("vision tower");
    return t;
  };

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
    LOOM_ASSIGN_OR_RETURN(Tensor qkv_w, get(b + "attn.qkv.weight", {3 * hidden, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor qkv_b, get(b + "attn.qkv.bias", {3 * hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor proj_w, get(b + "attn.proj.weight", {hidden, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor proj_b, get(b + "attn.proj.bias", {hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor gate_w, get(b + "mlp.gate_proj.weight", {inter, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor gate_b, get(b + "mlp.gate_proj.bias", {inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor up_w, get(b + "mlp.up_proj.weight", {inter, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor up_b, get(b + "mlp.up_proj.bias", {inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor down_w, get(b + "mlp.down_proj.weight", {hidden, inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor down_b, get(b + "mlp.down_proj.bias", {hidden}));
    blk.norm1 = ops.upload(n1);
    blk.norm2 = ops.upload(n2);
    // Rows [0, hidden) are q, [hidden, 2*hidden) k, the rest v (contiguous row blocks).
    blk.q_w = ops.upload_weight(qkv_w.slice_rows(0, hidden));
    blk.k_w = ops.upload_weight(qkv_w.slice_rows(hidden, 2 * hidden));
    blk.v_w = ops.upload_weight(qkv_w.slice_rows(2 * hidden, 3 * hidden));
    blk.q_b = ops.upload_weight(qkv_b.slice_rows(0, hidden));
    blk.k_b = ops.upload_weight(qkv_b.slice_rows(hidden, 2 * hidden));
    blk.v_b = ops.upload_weight(qkv_b.slice_rows(2 * hidden, 3 * hidden));
    blk.proj_w = ops.upload_weight(proj_w);
    blk.proj_b = ops.upload_weight(proj_b);
    blk.gate_up_w = ops.upload_weight(stack_rows(gate_w, up_w));
    blk.gate_up_b = ops.upload_weight(stack_rows(gate_b, up_b));
    blk.down_w = ops.upload_weight(down_w);
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

  // Axial rope: inv_freq[i] = 1 / theta^(2i / (head_dim/2)), i < head_dim/4, rounded to f32 as
  // transformers keeps it; h and w share these frequencies.
  const int64_t spatial_dim = config.head_dim() / 2;
  for (int64_t i = 0; i < spatial_dim / 2; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(spatial_dim);
    const float base_pow = static_cast<float>(std::pow(config.rope_theta, static_cast<double>(expo)));
    tower->inv_freq_.push_back(1.0f / base_pow);
  }
  return tower;
}

core::Expected<Tensor> Qwen25VisionTower::forward(const Tensor& pixel_values,
                                                  std::span<const std::array<int64_t, 3>> grids,
                                                  const DumpHook* dump) {
  const VisionConfig& c = config_;
  LOOM_ASSIGN_OR_RETURN(VisionLayout layout, make_vision_layout(c, grids));
  if (pixel_values.dtype() != DType::kF32 || pixel_values.rank() != 2 ||
      pixel_values.device() != core::Device::kCpu) {
    return core::invalid_argument("pixel_values must be a host f32 [patches, C*T*P*P] tensor, got " +
                                  core::shape_to_string(pixel_values.shape()));
  }
  if (pixel_values.dim(0) != layout.num_patches || pixel_values.dim(1) != c.patch_dim()) {
    return core::invalid_argument("pixel_values " + core::shape_to_string(pixel_values.shape()) +
                                  " does not match the grids: expected [" +
                                  std::to_string(layout.num_patches) + ", " + std::to_string(c.patch_dim()) +
                                  "]");
  }
  const int64_t n = layout.num_patches, hidden = c.hidden_size, heads = c.num_heads, hd = c.head_dim();
  const int64_t unit = c.merge_unit(), units = layout.num_units;
  const int64_t inter = c.intermediate_size, merged = hidden * unit;
  const DType act = ops_.activation_dtype();
  const bool dumping = dump != nullptr && *dump;
  auto emit = [&](std::string_view name, const Tensor& t) {
    if (dumping) (*dump)(name, ops_.to_host(t));
  };

  // Index arrays: token rows (rope table rows and identity KV slots), the window permutation of
  // merge units and its inverse, both segmentations.
  std::vector<int32_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = static_cast<int32_t>(i);
  std::vector<int32_t> unwindow(units);  // processor unit u sits at window-order row unwindow[u]
  for (int64_t j = 0; j < units; ++j) unwindow[layout.window_index[j]] = static_cast<int32_t>(j);
  const SegmentAttention windows(layout.cu_window_seqlens);
  const SegmentAttention frames(layout.cu_seqlens);
  ops_.prepare_indices({rows, layout.window_index, unwindow, windows.q_indptr, windows.kv_lens,
                        windows.block_table, frames.q_indptr, frames.kv_lens, frames.block_table});

  // patch_embed: [N, C*T*P*P] @ [hidden, C*T*P*P]^T -> [N, hidden] (processor order).
  const Tensor px = ops_.upload_scratch(host_as(pixel_values, act));
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
  const int64_t quarter = hd / 4, half = hd / 2;
  Tensor cos_h = Tensor::empty({n, half}, DType::kF32), sin_h = Tensor::empty({n, half}, DType::kF32);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float pos = static_cast<float>(i < quarter ? layout.pos_h[t] : layout.pos_w[t]);
      const float angle = pos * inv_freq_[i % quarter];
      cos_h.data_as<float>()[t * half + i] = std::cos(angle);
      sin_h.data_as<float>()[t * half + i] = std::sin(angle);
    }
  }
  const Tensor cos_t = ops_.upload_scratch(cos_h), sin_t = ops_.upload_scratch(sin_h);
  ops::RopeParams rope;
  rope.rotary_dim = static_cast<int32_t>(hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  Tensor h = ops_.empty({n, hidden}, act);
  // q, k, v, attn: [N, heads, hd]
  Tensor q = ops_.empty({n, heads, hd}, act);
  Tensor k = ops_.empty({n, heads, hd}, act);
  Tensor v = ops_.empty({n, heads, hd}, act);
  // Paged caches with block_size 1: [N blocks, 1, heads, hd]; block b holds token b.
  Tensor k_cache = ops_.empty({n, 1, heads, hd}, act);
  Tensor v_cache = ops_.empty({n, 1, heads, hd}, act);
  Tensor attn = ops_.empty({n, heads, hd}, act);
  Tensor proj = ops_.empty({n, hidden}, act);
  Tensor gate_up = ops_.empty({n, 2 * inter}, act);
  Tensor mlp_act = ops_.empty({n, inter}, act);
  Tensor mlp = ops_.empty({n, hidden}, act);
  Tensor q2 = q.reshape({n, hidden}), k2 = k.reshape({n, hidden}), v2 = v.reshape({n, hidden});

  for (int64_t b = 0; b < c.depth; ++b) {
    const Block& blk = blocks_[b];
    ops_.rms_norm(x, blk.norm1, kNormEps, h);
    ops_.linear(h, blk.q_w, blk.q_b, q2);
    ops_.linear(h, blk.k_w, blk.k_b, k2);
    ops_.linear(h, blk.v_w, blk.v_b, v2);
    ops_.rope(q, rows, cos_t, sin_t, rope);
    ops_.rope(k, rows, cos_t, sin_t, rope);
    ops_.write_kv(k, v, rows, k_cache, v_cache);
    const SegmentAttention& segs = c.is_full_attention(b) ? frames : windows;
    ops_.paged_attention(q, k_cache, v_cache, segs.params(scale), attn);
    ops_.linear(attn.reshape({n, hidden}), blk.proj_w, blk.proj_b, proj);
    // x += proj; h = rms_norm2(x)
    ops_.add_rms_norm(x, proj, blk.norm2, kNormEps, h);
    ops_.linear(h, blk.gate_up_w, blk.gate_up_b, gate_up);
    ops_.silu_mul(gate_up, mlp_act);
    ops_.linear(mlp_act, blk.down_w, blk.down_b, mlp);
    ops_.add_inplace(x, mlp);
    if (dumping) emit("vision.blk." + std::to_string(b) + ".out", x);
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
  Tensor out;
  if (m2.device() == core::Device::kCpu) {
    out = ops_.alloc({units, c.out_hidden_size}, act);
  } else {
    if (!out_buf_.defined() || out_buf_.dim(0) < units) {
      const int64_t cap = std::max<int64_t>(units, out_buf_.defined() ? 2 * out_buf_.dim(0) : 0);
      out_buf_ = ops_.alloc({cap, c.out_hidden_size}, act);
    }
    out = out_buf_.slice_rows(0, units);
  }
  ops_.embedding(m2, unwindow, out);
  emit("vision.merger", out);
  return out;
}

}  // namespace loom::models::qwen_vl
