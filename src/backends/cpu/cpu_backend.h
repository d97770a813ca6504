// The fast CPU backend on raw pointers and plain descriptors: it splits each op over a
// thread pool and runs the per-ISA kernels of kernels.h. It knows nothing about tensors
// or models; cpu_ops.h adapts it to the ops::Ops interface.
//
// Numerics: f32 activations and accumulation. Weights / caches f32, bf16 or f16 are
// upcast exactly. Decode-sized linears (m <= kGemvMaxRows) stream each weight row once
// through a fused GEMV; larger ones use OpenBLAS sgemm (bf16/f16 weights converted to
// f32 one tile of rows at a time). Attention is flash-style (online softmax, f32) over
// key chunks, split over the key range when there are too few work items to fill the
// threads, then merged.
//
// A CpuBackend is not reentrant: callers run one op at a time on it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backends/cpu/kernels.h"
#include "backends/cpu/thread_pool.h"
#include "core/dtype.h"

namespace loom::backends::cpu {

// y[m, n] = x[m, k] . w[n, k] + bias[n].
struct LinearDesc {
  const float* x = nullptr;  // [m, k]
  const void* w = nullptr;   // [n, k], w_type f32/bf16/f16
  core::DType w_type = core::DType::kF32;
  const void* bias = nullptr;  // [n] of bias_type, or null
  core::DType bias_type = core::DType::kF32;
  float* y = nullptr;  // [m, n]
  int64_t m = 0, k = 0, n = 0;
};

// Paged attention over a flattened batch (see ops::PagedAttentionParams).
struct AttentionDesc {
  const float* q = nullptr;  // [tokens, q_heads, head_dim]
  float* out = nullptr;      // [tokens, q_heads, head_dim]
  int64_t tokens = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  const void* k_cache = nullptr;  // [num_blocks, block_size, kv_heads, head_dim] of cache_type
  const void* v_cache = nullptr;
  core::DType cache_type = core::DType::kF32;
  int32_t num_seqs = 0;
  const int32_t* q_indptr = nullptr;     // [num_seqs + 1]
  const int32_t* kv_lens = nullptr;      // [num_seqs]
  const int32_t* block_table = nullptr;  // [num_seqs, max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 0;
  float scale = 1.0f;
  bool causal = true;
  int32_t sliding_window = 0;
};

class CpuBackend {
 public:
  // Linears with at most this many rows take the fused GEMV path. Measured on a 2-core
  // Zen 4 (AVX-512): the GEMV kernel runs at ~100 GFLOP/s per core for any m with bf16
  // weights, while the sgemm path pays a full weight conversion per call and only wins
  // beyond ~64 rows.
  static constexpr int64_t kGemvMaxRows = 64;

  // num_threads 0 = hardware concurrency; isa kAuto = best supported. LOOM_CHECKs that
  // `isa` is supported (use kernel_table() to probe).
  CpuBackend(int num_threads, CpuIsa isa);

  int num_threads() const { return pool_.num_threads(); }
  CpuIsa isa() const { return kernels_->isa; }

  void linear(const LinearDesc& d);
  void paged_attention(const AttentionDesc& d);

  // out[t, :] = table[ids[t], :] (table [vocab, hidden] f32/bf16/f16).
  void embedding(const void* table, core::DType table_type, int64_t hidden, const int32_t* ids,
                 int64_t tokens, float* out);
  // Row-wise over [rows, hidden]; weight [hidden] f32/bf16/f16. y may alias x.
  void rms_norm(const float* x, const void* weight, core::DType weight_type, float eps, int64_t rows,
                int64_t hidden, float* y);
  void add_rms_norm(float* residual, const float* x, const void* weight, core::DType weight_type, float eps,
                    int64_t rows, int64_t hidden, float* y);
  // x [tokens, heads, head_dim] in place; cos/sin [max_pos, half].
  void rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
            const float* cos, const float* sin, int64_t half);
  // torch LayerNorm row-wise over [rows, hidden]; weight [hidden], bias [hidden] or null (each
  // f32/bf16/f16). y may alias x.
  void layer_norm(const float* x, const void* weight, core::DType weight_type, const void* bias,
                  core::DType bias_type, float eps, int64_t rows, int64_t hidden, float* y);
  // y[i] = gelu(x[i]) (exact erf form, or torch's tanh approximation); y may alias x.
  void gelu(const float* x, float* y, int64_t n, bool tanh_approx);
  // gate_up [tokens, 2 * inter] -> out [tokens, inter].
  void silu_mul(const float* gate_up, int64_t tokens, int64_t inter, float* out);
  void add_inplace(float* a, const float* b, int64_t n);
  // k/v [tokens, row] into caches [slots, row] (row = kv_heads * head_dim) of cache_type.
  void write_kv(const float* k, const float* v, int64_t tokens, int64_t row, const int32_t* slot_mapping,
                void* k_cache, void* v_cache, core::DType cache_type);

 private:
  // Runs fn(begin, end) over [0, n) in chunks of at least min_chunk items, in parallel
  // when there is enough work.
  template <class Fn>
  void parallel_range(int64_t n, int64_t min_chunk, Fn&& fn);
  // An f32 view of a small vector (bias / norm weight): `src` itself when f32, else a
  // converted copy in `buf`.
  const float* as_f32(const void* src, core::DType type, int64_t n, std::vector<float>& buf);

  void linear_gemv(const LinearDesc& d, const float* bias);
  void linear_sgemm(const LinearDesc& d, const float* bias);

  ThreadPool pool_;
  const KernelTable* kernels_;
  std::vector<float> bias_buf_, norm_buf_, norm_bias_buf_, weight_tile_, partials_;
  std::vector<std::vector<float>> thread_scratch_;  // one per pool thread
};

template <class Fn>
void CpuBackend::parallel_range(int64_t n, int64_t min_chunk, Fn&& fn) {
  if (n <= 0) return;
  // A few chunks per thread so that dynamic scheduling evens out uneven rows.
  const int64_t max_chunks = 4 * int64_t{pool_.num_threads()};
  const int64_t chunks = std::min(max_chunks, n / std::max<int64_t>(min_chunk, 1));
  if (chunks <= 1 || pool_.num_threads() == 1) {
    fn(int64_t{0}, n);
    return;
  }
  const int64_t per = (n + chunks - 1) / chunks;
  pool_.parallel_for((n + per - 1) / per, [&](int64_t c, int) { fn(c * per, std::min(n, (c + 1) * per)); });
}

}  // namespace loom::backends::cpu
