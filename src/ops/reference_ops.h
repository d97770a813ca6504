// The CPU reference implementation of ops::Ops: the test oracle every backend is
// compared with. Plain loops, single-threaded, no BLAS; sums and softmax accumulate in
// double and round to f32 once at the end, so it is the most exact f32 answer we have.
// It is slow; use it for tests and tiny models only.
//
// Accepted dtypes (anything else fails a LOOM_CHECK, as do shape mismatches):
//   activations f32; weights, norm weights, biases and embedding tables f32/bf16/f16;
//   KV caches f32/bf16/f16 (write_kv rounds to the cache dtype, RNE).
// Shapes: rms_norm / add_rms_norm take any rank whose last dim equals weight.numel()
// (so per-head q/k norms run on [T*heads, head_dim]); other ops take the ranks in ops.h.
// Invariants beyond ops.h that are checked: token ids / positions / slots / block ids in
// range; per sequence kv_len >= q_len and kv_len <= max_blocks_per_seq * block_size.
// Sliding window is a lower bound on key positions (key pos > qpos - window), applied
// with or without the causal upper bound.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "ops/ops.h"

namespace loom::ops {

std::unique_ptr<Ops> make_reference_ops();

// The shape/dtype contract of each op, checked with LOOM_CHECK (a violation is a caller
// bug). Shared by every backend so they accept exactly the same calls; each returns the
// sizes the op works with.
namespace contract {

struct LinearDims {
  int64_t m = 0, k = 0, n = 0;
};
LinearDims check_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y);

struct RowDims {
  int64_t rows = 0, hidden = 0;
};
RowDims check_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& y);
RowDims check_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& y);

struct EmbeddingDims {
  int64_t tokens = 0, vocab = 0, hidden = 0;
};
EmbeddingDims check_embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out);

struct RopeDims {
  int64_t tokens = 0, heads = 0, head_dim = 0, half = 0, max_positions = 0;
};
RopeDims check_rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
                    const RopeParams& p);

// layer_norm: x any rank with last dim == weight.numel(); bias undefined or the same size;
// y the same shape as x (may alias it).
RowDims check_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y);

// gelu: x, y f32 of the same element count (y may alias x). Returns the element count.
int64_t check_gelu(const Tensor& x, const Tensor& y);

struct SiluMulDims {
  int64_t tokens = 0, inter = 0;
};
SiluMulDims check_silu_mul(const Tensor& gate_up, const Tensor& out);

// Returns the element count.
int64_t check_add_inplace(const Tensor& a, const Tensor& b);

struct KvDims {
  int64_t tokens = 0, kv_heads = 0, head_dim = 0, num_blocks = 0, block_size = 0;
};
KvDims check_write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping,
                      const Tensor& k_cache, const Tensor& v_cache);

struct AttentionDims {
  int64_t tokens = 0, q_heads = 0, kv_heads = 0, head_dim = 0, num_blocks = 0, num_seqs = 0;
};
AttentionDims check_paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                    const PagedAttentionParams& p, const Tensor& out);

}  // namespace contract
}  // namespace loom::ops
