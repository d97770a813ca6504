#include "models/qwen3_vl/vision_tower.h"

#include <algorithm>
#include <cmath>
#include <string_view>

#include "core/check.h"
#include "core/dtype.h"
#include "models/qwen3_vl/vision_layout.h"
#include "models/vision_common.h"

namespace loom::models::qwen3_vl {
namespace {

using core::DType;
using core::Shape;
using core::Tensor;

// transformers hard-codes eps 1e-6 for every LayerNorm of the vision tower (norm1, norm2, mergers).
constexpr float kNormEps = 1e-6f;

}  // namespace

core::Expected<Qwen3VisionTower::Merger> Qwen3VisionTower::load_merger(const VisionConfig& c,
                                                                       const vision::TowerWeights& weights,
                                                                       ops::Ops& ops,
                                                                       const std::string& prefix,
                                                                       bool postshuffle) {
  auto get = [&](const std::string& name, const Shape& shape) { return weights.get(prefix + name, shape); };
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
  LOOM_ASSIGN_OR_RETURN(const vision::TowerWeights weights, vision::TowerWeights::find(ckpt));
  tower->prefix_ = weights.prefix();
  auto get = [&](const std::string& name, const Shape& shape) { return weights.get(name, shape); };

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
    LOOM_ASSIGN_OR_RETURN(blk.attn, vision::load_attention(weights, ops, b, hidden));
    LOOM_ASSIGN_OR_RETURN(Tensor fc1_w, get(b + "mlp.linear_fc1.weight", {inter, hidden}));
    LOOM_ASSIGN_OR_RETURN(Tensor fc1_b, get(b + "mlp.linear_fc1.bias", {inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor fc2_w, get(b + "mlp.linear_fc2.weight", {hidden, inter}));
    LOOM_ASSIGN_OR_RETURN(Tensor fc2_b, get(b + "mlp.linear_fc2.bias", {hidden}));
    blk.norm1_w = ops.upload(n1w);
    blk.norm1_b = ops.upload(n1b);
    blk.norm2_w = ops.upload(n2w);
    blk.norm2_b = ops.upload(n2b);
    blk.fc1_w = ops.upload_weight(fc1_w);
    blk.fc1_b = ops.upload_weight(fc1_b);
    blk.fc2_w = ops.upload_weight(fc2_w);
    blk.fc2_b = ops.upload_weight(fc2_b);
    tower->blocks_.push_back(std::move(blk));
  }

  LOOM_ASSIGN_OR_RETURN(tower->merger_, load_merger(config, weights, ops, "merger.", false));
  for (size_t k = 0; k < config.deepstack_visual_indexes.size(); ++k) {
    LOOM_ASSIGN_OR_RETURN(Merger m, load_merger(config, weights, ops,
                                                "deepstack_merger_list." + std::to_string(k) + ".", true));
    tower->deepstack_.push_back(std::move(m));
  }

  tower->inv_freq_ = vision::axial_inv_freq(config.head_dim(), config.rope_theta);
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
  const Tensor w_dev = ops_.upload_scratch(vision::host_as(w_all, act));
  const Tensor h_dev = ops_.upload_scratch(vision::host_as(h_all, act));
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
  LOOM_RETURN_IF_ERROR(vision::check_pixel_values(pixel_values, layout.num_patches, c.patch_dim()));
  const int64_t n = layout.num_patches, hidden = c.hidden_size, heads = c.num_heads, hd = c.head_dim();
  const int64_t inter = c.intermediate_size, units = layout.num_units;
  const DType act_dtype = ops_.activation_dtype();
  const vision::DumpEmitter emit(ops_, dump);

  // Index arrays: rope rows and KV slots (token t uses table row t / block t), frame segments, and
  // the rows of the interpolated position tables.
  const std::vector<int32_t> rows = vision::identity_rows(n);
  const vision::SegmentAttention frames(layout.cu_seqlens);
  ops_.prepare_indices({rows, frames.q_indptr, frames.kv_lens, frames.block_table, layout.pos_row});

  // patch_embed: [N, C*T*P*P] @ [hidden, C*T*P*P]^T + bias -> [N, hidden].
  const Tensor px = ops_.upload_scratch(vision::host_as(pixel_values, act_dtype));
  Tensor x = ops_.empty({n, hidden}, act_dtype);
  ops_.linear(px, patch_w_, patch_b_, x);
  emit("vision.patch_embed", x);
  add_pos_embed(layout, x);
  emit("vision.embed", x);

  // Per-token rope tables [N, hd/2]: angles h*inv_freq then w*inv_freq (f32 products, as transformers).
  const vision::AxialRope rope = vision::upload_axial_rope(ops_, layout.pos_h, layout.pos_w, inv_freq_, hd);
  const ops::PagedAttentionParams attn_params = frames.params(rope.scale);

  Tensor h = ops_.empty({n, hidden}, act_dtype);
  vision::AttentionScratch scratch(ops_, n, heads, hd, act_dtype);
  Tensor act = ops_.empty({n, inter}, act_dtype);
  Tensor mlp = ops_.empty({n, hidden}, act_dtype);

  // Outputs: fresh host tensors on host backends; on device backends rows of the persistent buffer
  // (merger output first, then one block of rows per deepstack merger), see the header.
  out_buf_.begin(ops_, x.device() == core::Device::kCpu, 1 + static_cast<int64_t>(deepstack_.size()), units,
                 c.out_hidden_size, act_dtype);

  VisionOutput out;
  for (int64_t b = 0; b < c.depth; ++b) {
    const Block& blk = blocks_[b];
    ops_.layer_norm(x, blk.norm1_w, blk.norm1_b, kNormEps, h);
    vision::attention(ops_, h, blk.attn, rows, rope, attn_params, scratch);
    ops_.add_inplace(x, scratch.proj);
    ops_.layer_norm(x, blk.norm2_w, blk.norm2_b, kNormEps, h);
    ops_.linear(h, blk.fc1_w, blk.fc1_b, act);
    ops_.gelu(act, act, c.mlp_gelu_tanh());
    ops_.linear(act, blk.fc2_w, blk.fc2_b, mlp);
    ops_.add_inplace(x, mlp);
    if (emit.active()) emit("vision.blk." + std::to_string(b) + ".out", x);
    if (const int64_t slot = c.deepstack_slot(b); slot >= 0) {
      Tensor feat = out_buf_.get(1 + static_cast<int64_t>(out.deepstack.size()));
      run_merger(deepstack_[slot], x, feat);
      // Named by output position, as transformers' deepstack_features list.
      if (emit.active()) emit("vision.deepstack." + std::to_string(out.deepstack.size()), feat);
      out.deepstack.push_back(std::move(feat));
    }
  }

  out.embeds = out_buf_.get(0);
  run_merger(merger_, x, out.embeds);
  emit("vision.merger", out.embeds);
  return out;
}

}  // namespace loom::models::qwen3_vl
