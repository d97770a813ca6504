// Pieces shared by the Qwen ViT vision towers (qwen_vl/ Qwen2.5-VL, qwen3_vl/ Qwen3-VL): weight
// lookup under "model.visual." / "visual.", the fused-qkv attention weights split into q | k | v,
// the axial 2D rope tables, bidirectional segment attention over a block_size-1 paged cache, the
// persistent output buffer of device backends, and the config fields both vision configs read the
// same way. Everything here is exactly what both towers did before; numerics (summation order,
// rounding) are unchanged.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "core/tensor.h"
#include "models/checkpoint/checkpoint.h"
#include "models/config/json_fields.h"
#include "models/model.h"
#include "ops/ops.h"

namespace loom::models::vision {

// A host f32 tensor rounded to `dtype` (f32: the same tensor), RNE as torch's .to(dtype).
core::Tensor host_as(const core::Tensor& f32, core::DType dtype);

// Checkpoint tensors of one vision tower: finds the weight prefix ("model.visual." in transformers 5,
// "visual." in older checkpoints) and reads names below it with shape checks.
class TowerWeights {
 public:
  // NotFound when neither prefix holds patch_embed.proj.weight.
  static core::Expected<TowerWeights> find(const Checkpoint& ckpt);
  const std::string& prefix() const { return prefix_; }
  // prefix + name, shape-checked; errors carry the context "vision tower".
  core::Expected<core::Tensor> get(const std::string& name, const core::Shape& shape) const;

 private:
  TowerWeights(const Checkpoint& ckpt, std::string prefix) : ckpt_(&ckpt), prefix_(std::move(prefix)) {}
  const Checkpoint* ckpt_;
  std::string prefix_;
};

// One block's attention weights: the checkpoint's fused qkv [3*hidden, hidden] split at load into its
// q | k | v row blocks (head-major), so q, k, v come out contiguous as rope / write_kv /
// paged_attention take them; and the output projection.
struct AttentionWeights {
  core::Tensor q_w, q_b, k_w, k_b, v_w, v_b;  // [hidden, hidden], [hidden]
  core::Tensor proj_w, proj_b;                // [hidden, hidden], [hidden]
};
// Reads <block>attn.qkv.{weight,bias} and <block>attn.proj.{weight,bias}; linears via upload_weight.
core::Expected<AttentionWeights> load_attention(const TowerWeights& w, ops::Ops& ops,
                                                const std::string& block, int64_t hidden);

// Axial rope: inv_freq[i] = 1 / theta^(2i / (head_dim/2)), i < head_dim/4, rounded to f32 as
// transformers keeps it; h and w share these frequencies.
std::vector<float> axial_inv_freq(int64_t head_dim, double theta);

// Per-token rope tables [N, head_dim/2] host f32: angles pos_h[t]*inv_freq then pos_w[t]*inv_freq
// (f32 products, as transformers), for the ordinary rope op with rotary_dim = head_dim.
struct RopeTables {
  core::Tensor cos, sin;
};
RopeTables axial_rope_tables(std::span<const int32_t> pos_h, std::span<const int32_t> pos_w,
                             std::span<const float> inv_freq, int64_t head_dim);

// One forward's rotary setup: the tables above uploaded with upload_scratch (indexed by token row),
// the rope op's parameters and the attention scale 1/sqrt(head_dim).
struct AxialRope {
  core::Tensor cos, sin;
  ops::RopeParams params;
  float scale = 1.0f;
};
AxialRope upload_axial_rope(ops::Ops& ops, std::span<const int32_t> pos_h, std::span<const int32_t> pos_w,
                            std::span<const float> inv_freq, int64_t head_dim);

// The dump hook of a forward: emit(name, t) hands the hook a host copy (ops.to_host) when one is set.
class DumpEmitter {
 public:
  DumpEmitter(ops::Ops& ops, const DumpHook* dump)
      : ops_(ops), dump_(dump != nullptr && *dump ? dump : nullptr) {}
  bool active() const { return dump_ != nullptr; }
  void operator()(std::string_view name, const core::Tensor& t) const {
    if (dump_ != nullptr) (*dump_)(name, ops_.to_host(t));
  }

 private:
  ops::Ops& ops_;
  const DumpHook* dump_;
};

// Bidirectional attention over segments [cu[s], cu[s+1]) of a block_size-1 paged cache whose
// block b holds token b: sequence s reads blocks cu[s] .. cu[s+1]-1.
struct SegmentAttention {
  std::vector<int32_t> q_indptr, kv_lens, block_table;
  int32_t max_len = 0;

  explicit SegmentAttention(const std::vector<int32_t>& cu);
  ops::PagedAttentionParams params(float scale) const;
};

// InvalidArgument unless pixel_values is a host f32 [num_patches, patch_dim] tensor.
core::Status check_pixel_values(const core::Tensor& pixel_values, int64_t num_patches, int64_t patch_dim);

// 0, 1, ..., n-1: the rope table row and the KV block of each token.
std::vector<int32_t> identity_rows(int64_t n);

// Per-forward activations of one attention step over N tokens ([N, heads, hd] q/k/v/attn, the
// block_size-1 paged caches [N, 1, heads, hd], proj [N, hidden]); empty() tensors of one forward.
struct AttentionScratch {
  AttentionScratch(ops::Ops& ops, int64_t n, int64_t heads, int64_t head_dim, core::DType dtype);
  core::Tensor q, k, v, k_cache, v_cache, attn, proj;
  core::Tensor q2, k2, v2;  // q, k, v viewed [N, hidden]
};
// s.proj = proj(attention(rope(q(h)), rope(k(h)), v(h))) over `params`' segments; h [N, hidden],
// rows the identity token rows (rope table rows and KV blocks).
void attention(ops::Ops& ops, const core::Tensor& h, const AttentionWeights& w, std::span<const int32_t> rows,
               const AxialRope& rope, const ops::PagedAttentionParams& params, AttentionScratch& s);

// Tower outputs that outlive a forward's scratch. Host backends: a fresh ops.alloc tensor per output
// and call. Device backends: rows of one persistent buffer (ops.alloc, grown geometrically when a
// larger batch comes; the arena cannot free, so outgrown buffers stay reserved), `count` blocks of
// rows, which the next forward of the same tower overwrites.
class OutputBuffer {
 public:
  // Prepares `count` outputs of [units, width] in `dtype` for this forward.
  void begin(ops::Ops& ops, bool host, int64_t count, int64_t units, int64_t width, core::DType dtype);
  // Output `slot` (< count) of this forward.
  core::Tensor get(int64_t slot);

 private:
  ops::Ops* ops_ = nullptr;
  bool host_ = true;
  int64_t count_ = 1, units_ = 0, width_ = 0;
  core::DType dtype_ = core::DType::kF32;
  core::Tensor buf_;
};

// The "vision_config" fields of every Qwen ViT config (same names, same validation): read by
// read_common_fields, checked by check_common_fields (sizes positive, hidden_size % num_heads == 0,
// head_dim % 4 == 0). `Config` is qwen_vl:: or qwen3_vl::VisionConfig. rope_theta (read_rope_theta)
// and hidden_act are checked by the caller (the towers support different activations).
template <typename Config>
void read_common_fields(config_detail::FieldReader& r, const nlohmann::json& j, Config& c) {
  constexpr std::string_view kPath = "vision_config";
  auto get_int = [&](std::string_view key, int64_t& out) { out = r.int_or(j, kPath, key, out); };
  get_int("depth", c.depth);
  get_int("hidden_size", c.hidden_size);
  get_int("intermediate_size", c.intermediate_size);
  get_int("num_heads", c.num_heads);
  get_int("in_channels", c.in_channels);
  get_int("patch_size", c.patch_size);
  get_int("spatial_merge_size", c.spatial_merge_size);
  get_int("temporal_patch_size", c.temporal_patch_size);
  get_int("out_hidden_size", c.out_hidden_size);
  c.hidden_act = r.opt_string(j, kPath, "hidden_act").value_or(c.hidden_act);
}

// rope_theta, top-level or in rope_parameters (whose rope_type, when given, must be "axial").
core::Status read_rope_theta(config_detail::FieldReader& r, const nlohmann::json& j, double& theta);

// A list of block indices within [0, depth) (`distinct`: no repeats), named `key` in errors.
core::Status check_block_indexes(const std::vector<int64_t>& blocks, int64_t depth, std::string_view key,
                                 bool distinct);

template <typename Config>
core::Status check_common_fields(const Config& c) {
  for (auto [name, v] : {std::pair<const char*, int64_t>{"depth", c.depth},
                         {"hidden_size", c.hidden_size},
                         {"intermediate_size", c.intermediate_size},
                         {"num_heads", c.num_heads},
                         {"in_channels", c.in_channels},
                         {"patch_size", c.patch_size},
                         {"spatial_merge_size", c.spatial_merge_size},
                         {"temporal_patch_size", c.temporal_patch_size},
                         {"out_hidden_size", c.out_hidden_size}}) {
    if (v <= 0) {
      return core::invalid_argument(std::string("vision_config.") + name + " must be positive, got " +
                                    std::to_string(v));
    }
  }
  if (c.hidden_size % c.num_heads != 0) {
    return core::invalid_argument("vision_config.hidden_size " + std::to_string(c.hidden_size) +
                                  " is not a multiple of num_heads " + std::to_string(c.num_heads));
  }
  if (c.head_dim() % 4 != 0) {
    return core::invalid_argument("vision head_dim " + std::to_string(c.head_dim()) +
                                  " must be a multiple of 4 (2D rotary embedding)");
  }
  return core::Status::ok_status();
}

}  // namespace loom::models::vision
