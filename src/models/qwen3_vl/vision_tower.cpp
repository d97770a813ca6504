#include "models/qwen3_vl/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/check.h"
#include "core/dtype.h"
#include "models/qwen3_vl/vision_layout.h"

namespace loom::models::qwen3_vl {
namespace {

using core::DType;
using core::Shape;
using core::Tensor;

// transformers hard-codes eps 1e-6 for every LayerNorm of the vision tower (norm1, norm2, mergers).
constexpr float kNormEps = 1e-6f;

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

core::Expected<Qwen3VisionTower::Merger> Qwen3VisionTower::load_merger(const VisionConfig& c,
                                                                       const Checkpoint& ckpt, ops::Ops& ops,
                                                                       const std::string& prefix,
                                                                       bool postshuffle) {
  auto get = [&](const std::string& name, const Shape& shape) -> core::Expected<Tensor> {
    auto t = ckpt.get(prefix + name, shape);
    if (!t.ok()) return t.status().with_context("vision tower");
    return t;
  };
  const int64_t merged = c.hidden_size * c.merge_unit();
  const int64_t norm_dim = postshuffle ? merged : c.hidden_size;
  Merger m;
  m.postshuffle = postshuffle;
  LOOM_ASSIGN_OR_RETURN(Tensor nw, get("norm.weight", {norm_dim}));
  LOOM_ASSIGN_OR_RETURN(Tensor nb, get("norm.bias", {norm_dim}));
  LOOM_ASSIGN_OR_RETURN(Tensor w1, get("linear_fc1.weight", {merged, merged}));
  LOOM_ASSIGN_OR_RETURN(Tensor b1, get("linear_fc1.bias", {merged}));
  LOOM_ASSIGN_OR_RETURN(Tensor w2, get("linear_fc2.weight", {c.out_hidden_size, merged}));
  LOOM_ASSIGN_OR_RETURN(Tensor b2, get("linear_fc2.bias", {c.out_hidden_size}));
  m.norm_w = ops.upload(nw);
  m.norm_b = ops.upload(nb);
  m.fc1_w = ops.upload_weight(w1);
  m.fc1_b = ops.upload_weight(b1);
  m.fc2_w = ops.upload_weight(w2);
  m.fc2_b = ops.upload_weight(b2);
  return m;
}

core::Expected<std::unique_ptr<Qwen3VisionTower>> Qwen3VisionTower::load(const VisionConfig& config,
                                                                         const Checkpoint& ckpt,
                                                                         ops::Ops& ops) {
  std::unique_ptr<Qwen3VisionTower> tower(new Qwen3VisionTower(config, ops));
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
  LOOM_ASSIGN_OR_RETURN(
      Tensor patch, get("patch_embed.proj.weight", {hidden, config.in_channels, config.temporal_patch_size,
                                                    config.patch_size, config.patch_size}));
  LOOM_ASSIGN_OR_RETURN(Tensor patch_b, get("patch_embed.proj.bias", {hidden}));
  // Conv3d with stride == kernel over one patch == dot product with the flattened kernel.
  tower->patch_w_ = ops.upload_weight(patch.reshape({hidden, config.patch_dim()}));
  tower->patch_b_ = ops.upload_weight(patch_b);

  LOOM_ASSIGN_OR_RETURN(Tensor pos, get("pos_embed.weight", {config.num_position_embeddings, hidden}));
  {
    // The first side*side rows (transformers' grid) re-laid as the weight of the first interpolation
    // GEMM: E'[c*K + i, j] = E[i*side + j, c], zero where i or j >= side (see the header).
    const Tensor e = pos.to_f32();
    const int64_t side = config.num_grid_per_side(), kp = (side + 7) / 8 * 8;
    Tensor t = Tensor::zeros({hidden * kp, kp}, DType::kF32);
    for (int64_t i = 0; i < side; ++i) {
      for (int64_t j = 0; j < side; ++j) {
        const float* row = e.data_as<float>() + (i * side + j) * hidden;
        for (int64_t c = 0; c < hidden; ++c) t.data_as<float>()[(c * kp + i) * kp + j] = row[c];
      }
    }
    tower->pos_k_ = kp;
    tower->pos_table_ = ops.upload_weight(t);
  }

  for (int64_t i = 0; i < config.depth; ++i) {
    const std::string b = "blocks." + std::to_string(i) + ".";
    Block blk;
    LOOM_ASSIGN_OR_RETURN(Tensor n1w, get(b + "norm1.weight", {hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor n1b, get(b + "norm1.bias", {hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor n2w, get(b + "norm2.weight", {hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor n2b, get(b + "norm2.bias", {hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor qkv_w, get(b + "attn.qkv.weight", {3 * hidden, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor qkv_b, get(b + "attn.qkv.bias", {3 * hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor proj_w, get(b + "attn.proj.weight", {hidden, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor proj_b, get(b + "attn.proj.bias", {hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor fc1_w, get(b + "mlp.linear_fc1.weight", {inter, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor fc1_b, get(b + "mlp.linear_fc1.bias", {inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor fc2_w, get(b + "mlp.linear_fc2.weight", {hidden, inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor fc2_b, get(b + "mlp.linear_fc2.bias", {hidden}));
    blk.norm1_w = ops.upload(n1w);
    blk.norm1_b = ops.upload(n1b);
    blk.norm2_w = ops.upload(n2w);
    blk.norm2_b = ops.upload(n2b);
    // Rows [0, hidden) are q, [hidden, 2*hidden) k, the rest v (contiguous row blocks).
    blk.q_w = ops.upload_weight(qkv_w.slice_rows(0, hidden));
    blk.k_w = ops.upload_weight(qkv_w.slice_rows(hidden, 2 * hidden));
    blk.v_w = ops.upload_weight(qkv_w.slice_rows(2 * hidden, 3 * hidden));
    blk.q_b = ops.upload_weight(qkv_b.slice_rows(0, hidden));
    blk.k_b = ops.upload_weight(qkv_b.slice_rows(hidden, 2 * hidden));
    blk.v_b = ops.upload_weight(qkv_b.slice_rows(2 * hidden, 3 * hidden));
    blk.proj_w = ops.upload_weight(proj_w);
    blk.proj_b = ops.upload_weight(proj_b);
    blk.fc1_w = ops.upload_weight(fc1_w);
    blk.fc1_b = ops.upload_weight(fc1_b);
    blk.fc2_w = ops.upload_weight(fc2_w);
    blk.fc2_b = ops.upload_weight(fc2_b);
    tower->blocks_.push_back(std::move(blk));
  }

  LOOM_ASSIGN_OR_RETURN(tower->merger_, load_merger(config, ckpt, ops, pre + "merger.", false));
  for (size_t k = 0; k < config.deepstack_visual_indexes.size(); ++k) {
    LOOM_ASSIGN_OR_RETURN(
        Merger m,
        load_merger(config, ckpt, ops, pre + "deepstack_merger_list." + std::to_string(k) + ".", true));
    tower->deepstack_.push_back(std::move(m));
  }

  // Axial rope: inv_freq[i] = 1 / theta^(2i / (head_dim/2)), i < head_dim/4, rounded to f32 as
  // transformers keeps it (equal to torch's f32 pow on head_dim 16..128); h and w share these.
  const int64_t spatial_dim = config.head_dim() / 2;
  for (int64_t i = 0; i < spatial_dim / 2; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(spatial_dim);
    const float base_pow = static_cast<float>(std::pow(config.rope_theta, static_cast<double>(expo)));
    tower->inv_freq_.push_back(1.0f / base_pow);
  }
  return tower;
}

void Qwen3VisionTower::run_merger(const Merger& m, const Tensor& x, Tensor& out) {
  const int64_t n = x.dim(0), hidden = config_.hidden_size;
  const int64_t units = n / config_.merge_unit(), merged = hidden * config_.merge_unit();
  const DType act = ops_.activation_dtype();
  // Each unit's merge^2 consecutive rows side by side: [N, hidden] viewed [units, merge^2 * hidden].
  Tensor normed;
  if (m.postshuffle) {
    normed = ops_.empty({units, merged}, act);
    ops_.layer_norm(x.reshape({units, merged}), m.norm_w, m.norm_b, kNormEps, normed);
  } else {
    normed = ops_.empty({n, hidden}, act);
    ops_.layer_norm(x, m.norm_w, m.norm_b, kNormEps, normed);
    normed = normed.reshape({units, merged});
  }
  Tensor h = ops_.empty({units, merged}, act);
  ops_.linear(normed, m.fc1_w, m.fc1_b, h);
  ops_.gelu(h, h, /*tanh_approx=*/false);  // nn.GELU(): exact erf form
  ops_.linear(h, m.fc2_w, m.fc2_b, out);
}

void Qwen3VisionTower::add_pos_embed(const VisionLayout& layout, Tensor& x) {
  const int64_t hidden = config_.hidden_size, side = config_.num_grid_per_side(), kp = pos_k_;
  const DType act = ops_.activation_dtype();
  // Per-axis weight matrices of the distinct grid sizes: W_all [sum w, K] (columns), H_all [sum h, K].
  int64_t sum_w = 0, sum_h = 0, sum_hw = 0;
  for (const auto& [h, w] : layout.pos_grids) {
    sum_h += h;
    sum_w += w;
    sum_hw += h * w;
  }
  Tensor w_all = Tensor::empty({sum_w, kp}, DType::kF32), h_all = Tensor::empty({sum_h, kp}, DType::kF32);
  {
    int64_t ro = 0, co = 0;
    for (const auto& [h, w] : layout.pos_grids) {
      axis_interpolation(h, side, kp, h_all.data_as<float>() + ro * kp);
      axis_interpolation(w, side, kp, w_all.data_as<float>() + co * kp);
      ro += h;
      co += w;
    }
  }
  const Tensor w_dev = ops_.upload_scratch(host_as(w_all, act));
  const Tensor h_dev = ops_.upload_scratch(host_as(h_all, act));
  // Y[q, c*K + i] = sum_j W[q, j] E[i, j, c]: the table resampled along columns, for every table row i.
  Tensor y = ops_.empty({sum_w, hidden * kp}, act);
  ops_.linear(w_dev, pos_table_, Tensor(), y);
  // Per grid: Z[r, q*hidden + c] = sum_i H[r, i] Y[q, c*K + i]: rows resampled too, raster order.
  Tensor z = ops_.empty({sum_hw, hidden}, act);
  int64_t ro = 0, co = 0, zo = 0;
  for (const auto& [h, w] : layout.pos_grids) {
    const Tensor yg = y.slice_rows(co, co + w).reshape({w * hidden, kp});
    Tensor zg = z.slice_rows(zo, zo + h * w).reshape({h, w * hidden});
    ops_.linear(h_dev.slice_rows(ro, ro + h), yg, Tensor(), zg);
    ro += h;
    co += w;
    zo += h * w;
  }
  // Raster rows -> processor order, once per frame.
  Tensor pos = ops_.empty({layout.num_patches, hidden}, act);
  ops_.embedding(z, layout.pos_row, pos);
  ops_.add_inplace(x, pos);
}

core::Expected<VisionOutput> Qwen3VisionTower::forward(const Tensor& pixel_values,
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
  const int64_t inter = c.intermediate_size, units = layout.num_units;
  const DType act_dtype = ops_.activation_dtype();
  const bool dumping = dump != nullptr && *dump;
  auto emit = [&](std::string_view name, const Tensor& t) {
    if (dumping) (*dump)(name, ops_.to_host(t));
  };

  // Index arrays: rope rows and KV slots (token t uses table row t / block t), frame segments, and
  // the rows of the interpolated position tables.
  std::vector<int32_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = static_cast<int32_t>(i);
  const SegmentAttention frames(layout.cu_seqlens);
  ops_.prepare_indices({rows, frames.q_indptr, frames.kv_lens, frames.block_table, layout.pos_row});

  // patch_embed: [N, C*T*P*P] @ [hidden, C*T*P*P]^T + bias -> [N, hidden].
  const Tensor px = ops_.upload_scratch(host_as(pixel_values, act_dtype));
  Tensor x = ops_.empty({n, hidden}, act_dtype);
  ops_.linear(px, patch_w_, patch_b_, x);
  emit("vision.patch_embed", x);
  add_pos_embed(layout, x);
  emit("vision.embed", x);

  // Per-token rope tables [N, hd/2]: angles h*inv_freq then w*inv_freq (f32 products, as transformers).
  const int64_t quarter = hd / 4, half = hd / 2;
  Tensor cos_h = Tensor::empty({n, half}, DType::kF32), sin_h = Tensor::empty({n, half}, DType::kF32);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float p = static_cast<float>(i < quarter ? layout.pos_h[t] : layout.pos_w[t]);
      const float angle = p * inv_freq_[i % quarter];
      cos_h.data_as<float>()[t * half + i] = std::cos(angle);
      sin_h.data_as<float>()[t * half + i] = std::sin(angle);
    }
  }
  const Tensor cos_t = ops_.upload_scratch(cos_h), sin_t = ops_.upload_scratch(sin_h);
  ops::RopeParams rope;
  rope.rotary_dim = static_cast<int32_t>(hd);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const ops::PagedAttentionParams attn_params = frames.params(scale);

  Tensor h = ops_.empty({n, hidden}, act_dtype);
  // q, k, v, attn: [N, heads, hd]
  Tensor q = ops_.empty({n, heads, hd}, act_dtype);
  Tensor k = ops_.empty({n, heads, hd}, act_dtype);
  Tensor v = ops_.empty({n, heads, hd}, act_dtype);
  // Paged caches with block_size 1: [N blocks, 1, heads, hd]; block b holds token b.
  Tensor k_cache = ops_.empty({n, 1, heads, hd}, act_dtype);
  Tensor v_cache = ops_.empty({n, 1, heads, hd}, act_dtype);
  Tensor attn = ops_.empty({n, heads, hd}, act_dtype);
  Tensor proj = ops_.empty({n, hidden}, act_dtype);
  Tensor act = ops_.empty({n, inter}, act_dtype);
  Tensor mlp = ops_.empty({n, hidden}, act_dtype);
  Tensor q2 = q.reshape({n, hidden}), k2 = k.reshape({n, hidden}), v2 = v.reshape({n, hidden});

  // Outputs: fresh host tensors on host backends; on device backends rows of the persistent buffer
  // (merger output first, then one block of rows per deepstack merger), see the header.
  const int64_t outputs = 1 + static_cast<int64_t>(deepstack_.size());
  const bool host = x.device() == core::Device::kCpu;
  if (!host && (!out_buf_.defined() || out_buf_.dim(0) < outputs * units)) {
    const int64_t cap = std::max<int64_t>(units, out_buf_.defined() ? 2 * (out_buf_.dim(0) / outputs) : 0);
    out_buf_ = ops_.alloc({outputs * cap, c.out_hidden_size}, act_dtype);
  }
  auto output = [&](int64_t slot) {
    if (host) return ops_.alloc({units, c.out_hidden_size}, act_dtype);
    const int64_t cap = out_buf_.dim(0) / outputs;
    return out_buf_.slice_rows(slot * cap, slot * cap + units);
  };

  VisionOutput out;
  for (int64_t b = 0; b < c.depth; ++b) {
    const Block& blk = blocks_[b];
    ops_.layer_norm(x, blk.norm1_w, blk.norm1_b, kNormEps, h);
    ops_.linear(h, blk.q_w, blk.q_b, q2);
    ops_.linear(h, blk.k_w, blk.k_b, k2);
    ops_.linear(h, blk.v_w, blk.v_b, v2);
    ops_.rope(q, rows, cos_t, sin_t, rope);
    ops_.rope(k, rows, cos_t, sin_t, rope);
    ops_.write_kv(k, v, rows, k_cache, v_cache);
    ops_.paged_attention(q, k_cache, v_cache, attn_params, attn);
    ops_.linear(attn.reshape({n, hidden}), blk.proj_w, blk.proj_b, proj);
    ops_.add_inplace(x, proj);
    ops_.layer_norm(x, blk.norm2_w, blk.norm2_b, kNormEps, h);
    ops_.linear(h, blk.fc1_w, blk.fc1_b, act);
    ops_.gelu(act, act, c.mlp_gelu_tanh());
    ops_.linear(act, blk.fc2_w, blk.fc2_b, mlp);
    ops_.add_inplace(x, mlp);
    if (dumping) emit("vision.blk." + std::to_string(b) + ".out", x);
    if (const int64_t slot = c.deepstack_slot(b); slot >= 0) {
      Tensor feat = output(1 + static_cast<int64_t>(out.deepstack.size()));
      run_merger(deepstack_[slot], x, feat);
      // Named by output position, as transformers' deepstack_features list.
      if (dumping) emit("vision.deepstack." + std::to_string(out.deepstack.size()), feat);
      out.deepstack.push_back(std::move(feat));
    }
  }

  out.embeds = output(0);
  run_merger(merger_, x, out.embeds);
  emit("vision.merger", out.embeds);
  return out;
}

}  // namespace loom::models::qwen3_vl
