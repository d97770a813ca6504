#include "models/qwen_vl/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string_view>

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
  if (ops.empty({1}, DType::kF32).device() != core::Device::kCpu) {
    return core::unsupported(
        std::string("the Qwen2.5-VL vision tower runs on host-memory backends only, not ") + ops.name());
  }
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
    blk.qkv_w = ops.upload_weight(qkv_w);
    blk.qkv_b = ops.upload_weight(qkv_b);
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
  auto emit = [&](std::string_view name, const Tensor& t) {
    if (dump != nullptr && *dump) (*dump)(name, t);
  };

  // Index arrays: rope rows (token t uses table row t), identity KV slots, both segmentations.
  std::vector<int32_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = static_cast<int32_t>(i);
  const SegmentAttention windows(layout.cu_window_seqlens);
  const SegmentAttention frames(layout.cu_seqlens);
  ops_.prepare_indices({rows, windows.q_indptr, windows.kv_lens, windows.block_table, frames.q_indptr,
                        frames.kv_lens, frames.block_table});

  // patch_embed: [N, C*T*P*P] @ [hidden, C*T*P*P]^T -> [N, hidden] (processor order).
  Tensor embed = ops_.empty({n, hidden}, DType::kF32);
  ops_.linear(pixel_values, patch_w_, Tensor(), embed);
  emit("vision.patch_embed", embed);

  // x [N, hidden] in window order: unit j <- processor unit window_index[j].
  Tensor x = ops_.empty({n, hidden}, DType::kF32);
  const size_t unit_bytes = static_cast<size_t>(unit * hidden) * sizeof(float);
  for (int64_t j = 0; j < units; ++j) {
    std::memcpy(x.data_as<float>() + j * unit * hidden,
                embed.data_as<float>() + int64_t{layout.window_index[j]} * unit * hidden, unit_bytes);
  }

  // Per-token rope tables [N, hd/2]: angles h*inv_freq then w*inv_freq (f32 products, as transformers).
  const int64_t quarter = hd / 4, half = hd / 2;
  Tensor cos_t = Tensor::empty({n, half}, DType::kF32), sin_t = Tensor::empty({n, half}, DType::kF32);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float pos = static_cast<float>(i < quarter ? layout.pos_h[t] : layout.pos_w[t]);
      const float angle = pos * inv_freq_[i % quarter];
      cos_t.data_as<float>()[t * half + i] = std::cos(angle);
      sin_t.data_as<float>()[t * half + i] = std::sin(angle);
    }
  }
  cos_t = ops_.upload(cos_t);
  sin_t = ops_.upload(sin_t);
  ops::RopeParams rope;
  rope.rotary_dim = static_cast<int32_t>(hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  Tensor h = ops_.empty({n, hidden}, DType::kF32);
  Tensor qkv = ops_.empty({n, 3 * hidden}, DType::kF32);
  Tensor q = ops_.empty({n, heads, hd}, DType::kF32);
  Tensor k = ops_.empty({n, heads, hd}, DType::kF32);
  Tensor v = ops_.empty({n, heads, hd}, DType::kF32);
  // Paged caches with block_size 1: [N blocks, 1, heads, hd]; block b holds token b.
  Tensor k_cache = ops_.empty({n, 1, heads, hd}, DType::kF32);
  Tensor v_cache = ops_.empty({n, 1, heads, hd}, DType::kF32);
  Tensor attn = ops_.empty({n, heads, hd}, DType::kF32);
  Tensor proj = ops_.empty({n, hidden}, DType::kF32);
  Tensor gate_up = ops_.empty({n, 2 * inter}, DType::kF32);
  Tensor act = ops_.empty({n, inter}, DType::kF32);
  Tensor mlp = ops_.empty({n, hidden}, DType::kF32);

  for (int64_t b = 0; b < c.depth; ++b) {
    const Block& blk = blocks_[b];
    ops_.rms_norm(x, blk.norm1, kNormEps, h);
    ops_.linear(h, blk.qkv_w, blk.qkv_b, qkv);
    // qkv rows are [3, heads, hd]: split into contiguous q, k, v [N, heads, hd].
    for (int64_t t = 0; t < n; ++t) {
      const float* src = qkv.data_as<float>() + t * 3 * hidden;
      std::memcpy(q.data_as<float>() + t * hidden, src, hidden * sizeof(float));
      std::memcpy(k.data_as<float>() + t * hidden, src + hidden, hidden * sizeof(float));
      std::memcpy(v.data_as<float>() + t * hidden, src + 2 * hidden, hidden * sizeof(float));
    }
    ops_.rope(q, rows, cos_t, sin_t, rope);
    ops_.rope(k, rows, cos_t, sin_t, rope);
    ops_.write_kv(k, v, rows, k_cache, v_cache);
    const SegmentAttention& segs = c.is_full_attention(b) ? frames : windows;
    ops_.paged_attention(q, k_cache, v_cache, segs.params(scale), attn);
    ops_.linear(attn.reshape({n, hidden}), blk.proj_w, blk.proj_b, proj);
    // x += proj; h = rms_norm2(x)
    ops_.add_rms_norm(x, proj, blk.norm2, kNormEps, h);
    ops_.linear(h, blk.gate_up_w, blk.gate_up_b, gate_up);
    ops_.silu_mul(gate_up, act);
    ops_.linear(act, blk.down_w, blk.down_b, mlp);
    ops_.add_inplace(x, mlp);
    if (dump != nullptr && *dump) emit("vision.blk." + std::to_string(b) + ".out", x);
  }

  // Merger: ln_q, then each unit's merge^2 rows side by side -> [units, merge^2 * hidden].
  ops_.rms_norm(x, ln_q_, kNormEps, h);
  Tensor m1 = ops_.empty({units, merged}, DType::kF32);
  ops_.linear(h.reshape({units, merged}), merger_w1_, merger_b1_, m1);
  // nn.GELU(): exact erf form.
  float* m1p = m1.data_as<float>();
  for (int64_t i = 0; i < units * merged; ++i) {
    const double val = m1p[i];
    m1p[i] = static_cast<float>(0.5 * val * (1.0 + std::erf(val / std::sqrt(2.0))));
  }
  Tensor m2 = ops_.empty({units, c.out_hidden_size}, DType::kF32);
  ops_.linear(m1, merger_w2_, merger_b2_, m2);

  // Undo the window order: processor unit window_index[j] <- window-order row j.
  Tensor out = Tensor::empty({units, c.out_hidden_size}, DType::kF32);
  const size_t row_bytes = static_cast<size_t>(c.out_hidden_size) * sizeof(float);
  for (int64_t j = 0; j < units; ++j) {
    std::memcpy(out.data_as<float>() + int64_t{layout.window_index[j]} * c.out_hidden_size,
                m2.data_as<float>() + j * c.out_hidden_size, row_bytes);
  }
  emit("vision.merger", out);
  return out;
}

}  // namespace loom::models::qwen_vl
