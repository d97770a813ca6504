#include "models/vision_common.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/dtype.h"

namespace loom::models::vision {

using core::DType;
using core::Shape;
using core::Tensor;

Tensor host_as(const Tensor& f32, DType dtype) {
  if (dtype == DType::kF32) return f32;
  LOOM_CHECK(dtype == DType::kBF16 || dtype == DType::kF16)
      << "unsupported activation dtype " << core::dtype_name(dtype);
  Tensor out = Tensor::empty(f32.shape(), dtype);
  core::convert_from_f32(f32.data_as<float>(), dtype, out.data(), static_cast<size_t>(f32.numel()));
  return out;
}

core::Expected<TowerWeights> TowerWeights::find(const Checkpoint& ckpt) {
  for (const char* prefix : {"model.visual.", "visual."}) {
    if (ckpt.has(std::string(prefix) + "patch_embed.proj.weight")) return TowerWeights(ckpt, prefix);
  }
  return core::not_found(
      "no vision tower weights: neither model.visual.patch_embed.proj.weight nor "
      "visual.patch_embed.proj.weight is in the checkpoint");
}

core::Expected<Tensor> TowerWeights::get(const std::string& name, const Shape& shape) const {
  auto t = ckpt_->get(prefix_ + name, shape);
  if (!t.ok()) return t.status().with_context("vision tower");
  return t;
}

core::Expected<AttentionWeights> load_attention(const TowerWeights& w, ops::Ops& ops,
                                                const std::string& block, int64_t hidden) {
  LOOM_ASSIGN_OR_RETURN(Tensor qkv_w, w.get(block + "attn.qkv.weight", {3 * hidden, hidden}));
  LOOM_ASSIGN_OR_RETURN(Tensor qkv_b, w.get(block + "attn.qkv.bias", {3 * hidden}));
  LOOM_ASSIGN_OR_RETURN(Tensor proj_w, w.get(block + "attn.proj.weight", {hidden, hidden}));
  LOOM_ASSIGN_OR_RETURN(Tensor proj_b, w.get(block + "attn.proj.bias", {hidden}));
  AttentionWeights a;
  // Rows [0, hidden) are q, [hidden, 2*hidden) k, the rest v (contiguous row blocks).
  a.q_w = ops.upload_weight(qkv_w.slice_rows(0, hidden));
  a.k_w = ops.upload_weight(qkv_w.slice_rows(hidden, 2 * hidden));
  a.v_w = ops.upload_weight(qkv_w.slice_rows(2 * hidden, 3 * hidden));
  a.q_b = ops.upload_weight(qkv_b.slice_rows(0, hidden));
  a.k_b = ops.upload_weight(qkv_b.slice_rows(hidden, 2 * hidden));
  a.v_b = ops.upload_weight(qkv_b.slice_rows(2 * hidden, 3 * hidden));
  a.proj_w = ops.upload_weight(proj_w);
  a.proj_b = ops.upload_weight(proj_b);
  return a;
}

std::vector<float> axial_inv_freq(int64_t head_dim, double theta) {
  // Equal to torch's f32 pow on head_dim 16..128.
  const int64_t spatial_dim = head_dim / 2;
  std::vector<float> inv_freq;
  for (int64_t i = 0; i < spatial_dim / 2; ++i) {
    const float expo = static_cast<float>(2 * i) / static_cast<float>(spatial_dim);
    const float base_pow = static_cast<float>(std::pow(theta, static_cast<double>(expo)));
    inv_freq.push_back(1.0f / base_pow);
  }
  return inv_freq;
}

RopeTables axial_rope_tables(std::span<const int32_t> pos_h, std::span<const int32_t> pos_w,
                             std::span<const float> inv_freq, int64_t head_dim) {
  const int64_t n = static_cast<int64_t>(pos_h.size());
  const int64_t quarter = head_dim / 4, half = head_dim / 2;
  RopeTables r{Tensor::empty({n, half}, DType::kF32), Tensor::empty({n, half}, DType::kF32)};
  float* cos = r.cos.data_as<float>();
  float* sin = r.sin.data_as<float>();
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const float pos = static_cast<float>(i < quarter ? pos_h[t] : pos_w[t]);
      const float angle = pos * inv_freq[i % quarter];
      cos[t * half + i] = std::cos(angle);
      sin[t * half + i] = std::sin(angle);
    }
  }
  return r;
}

AxialRope upload_axial_rope(ops::Ops& ops, std::span<const int32_t> pos_h, std::span<const int32_t> pos_w,
                            std::span<const float> inv_freq, int64_t head_dim) {
  const RopeTables tables = axial_rope_tables(pos_h, pos_w, inv_freq, head_dim);
  AxialRope r;
  r.cos = ops.upload_scratch(tables.cos);
  r.sin = ops.upload_scratch(tables.sin);
  r.params.rotary_dim = static_cast<int32_t>(head_dim);
  r.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  return r;
}

SegmentAttention::SegmentAttention(const std::vector<int32_t>& cu) : q_indptr(cu) {
  const size_t segs = cu.size() - 1;
  for (size_t s = 0; s < segs; ++s) max_len = std::max(max_len, cu[s + 1] - cu[s]);
  kv_lens.resize(segs);
  block_table.assign(segs * static_cast<size_t>(max_len), 0);
  for (size_t s = 0; s < segs; ++s) {
    kv_lens[s] = cu[s + 1] - cu[s];
    for (int32_t j = 0; j < kv_lens[s]; ++j) block_table[s * max_len + j] = cu[s] + j;
  }
}

ops::PagedAttentionParams SegmentAttention::params(float scale) const {
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

core::Status check_pixel_values(const Tensor& pixel_values, int64_t num_patches, int64_t patch_dim) {
  if (pixel_values.dtype() != DType::kF32 || pixel_values.rank() != 2 ||
      pixel_values.device() != core::Device::kCpu) {
    return core::invalid_argument("pixel_values must be a host f32 [patches, C*T*P*P] tensor, got " +
                                  core::shape_to_string(pixel_values.shape()));
  }
  if (pixel_values.dim(0) != num_patches || pixel_values.dim(1) != patch_dim) {
    return core::invalid_argument("pixel_values " + core::shape_to_string(pixel_values.shape()) +
                                  " does not match the grids: expected [" + std::to_string(num_patches) +
                                  ", " + std::to_string(patch_dim) + "]");
  }
  return core::Status::ok_status();
}

std::vector<int32_t> identity_rows(int64_t n) {
  std::vector<int32_t> rows(n);
  for (int64_t i = 0; i < n; ++i) rows[i] = static_cast<int32_t>(i);
  return rows;
}

AttentionScratch::AttentionScratch(ops::Ops& ops, int64_t n, int64_t heads, int64_t head_dim, DType dtype)
    : q(ops.empty({n, heads, head_dim}, dtype)),
      k(ops.empty({n, heads, head_dim}, dtype)),
      v(ops.empty({n, heads, head_dim}, dtype)),
      // Paged caches with block_size 1: [N blocks, 1, heads, hd]; block b holds token b.
      k_cache(ops.empty({n, 1, heads, head_dim}, dtype)),
      v_cache(ops.empty({n, 1, heads, head_dim}, dtype)),
      attn(ops.empty({n, heads, head_dim}, dtype)),
      proj(ops.empty({n, heads * head_dim}, dtype)),
      q2(q.reshape({n, heads * head_dim})),
      k2(k.reshape({n, heads * head_dim})),
      v2(v.reshape({n, heads * head_dim})) {}

void attention(ops::Ops& ops, const Tensor& h, const AttentionWeights& w, std::span<const int32_t> rows,
               const AxialRope& rope, const ops::PagedAttentionParams& params, AttentionScratch& s) {
  ops.linear(h, w.q_w, w.q_b, s.q2);
  ops.linear(h, w.k_w, w.k_b, s.k2);
  ops.linear(h, w.v_w, w.v_b, s.v2);
  ops.rope(s.q, rows, rope.cos, rope.sin, rope.params);
  ops.rope(s.k, rows, rope.cos, rope.sin, rope.params);
  ops.write_kv(s.k, s.v, rows, s.k_cache, s.v_cache);
  ops.paged_attention(s.q, s.k_cache, s.v_cache, params, s.attn);
  ops.linear(s.attn.reshape({h.dim(0), h.dim(1)}), w.proj_w, w.proj_b, s.proj);
}

void OutputBuffer::begin(ops::Ops& ops, bool host, int64_t count, int64_t units, int64_t width, DType dtype) {
  ops_ = &ops;
  host_ = host;
  count_ = count;
  units_ = units;
  width_ = width;
  dtype_ = dtype;
  if (!host && (!buf_.defined() || buf_.dim(0) < count * units)) {
    const int64_t cap = std::max<int64_t>(units, buf_.defined() ? 2 * (buf_.dim(0) / count) : 0);
    buf_ = ops.alloc({count * cap, width}, dtype);
  }
}

Tensor OutputBuffer::get(int64_t slot) {
  LOOM_CHECK(ops_ != nullptr && slot >= 0 && slot < count_) << "output slot " << slot << " of " << count_;
  if (host_) return ops_->alloc({units_, width_}, dtype_);
  const int64_t cap = buf_.dim(0) / count_;
  return buf_.slice_rows(slot * cap, slot * cap + units_);
}

core::Status read_rope_theta(config_detail::FieldReader& r, const nlohmann::json& j, double& theta) {
  theta = r.number_or(j, "vision_config", "rope_theta", theta);
  if (const nlohmann::json* rp = r.object(j, "vision_config", "rope_parameters"); rp != nullptr) {
    theta = r.number_or(*rp, "vision_config.rope_parameters", "rope_theta", theta);
    if (const nlohmann::json* type = config_detail::FieldReader::find(*rp, "rope_type");
        type != nullptr && !(type->is_string() && type->get<std::string>() == "axial")) {
      return core::unsupported("vision_config.rope_parameters.rope_type must be \"axial\"");
    }
  }
  return core::Status::ok_status();
}

core::Status check_block_indexes(const std::vector<int64_t>& blocks, int64_t depth, std::string_view key,
                                 bool distinct) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const int64_t b = blocks[i];
    if (b < 0 || b >= depth) {
      return core::invalid_argument("vision_config." + std::string(key) + " entry " + std::to_string(b) +
                                    " is outside [0, depth)");
    }
    if (distinct && std::find(blocks.begin(), blocks.begin() + i, b) != blocks.begin() + i) {
      return core::invalid_argument("vision_config." + std::string(key) + " lists block " +
                                    std::to_string(b) + " twice");
    }
  }
  return core::Status::ok_status();
}

}  // namespace loom::models::vision
