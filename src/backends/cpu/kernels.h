// Single-threaded CPU kernels on raw pointers, compiled once per instruction set
// (kernels_generic.cpp, kernels_avx2.cpp, kernels_avx512.cpp) from the templates in
// kernels_impl.h and chosen at run time by CPU feature detection. The multi-threaded
// drivers (linear.cpp, attention.cpp, elementwise.cpp) split work and call these.
//
// Every pointer argument has been validated by the caller (ops::contract checks); the
// kernels do no checking of their own (see kernels_impl.h for why they must not).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace loom::backends::cpu {

enum class CpuIsa : uint8_t {
  kAuto,     // the best one this CPU supports
  kGeneric,  // portable C++ (GCC vector extensions, 4 lanes)
  kAvx2,     // AVX2 + FMA + F16C, 8 lanes
  kAvx512,   // AVX-512F, 16 lanes
};

std::string_view isa_name(CpuIsa isa);

// Rows [n_begin, n_end) of y[m, n] = sum_k x[m, k] * w[n, k] + bias[n], m < m_rows.
struct GemvArgs {
  const float* x = nullptr;  // [m_rows, k], row stride k
  int64_t m_rows = 0;
  int64_t k = 0;
  const void* w = nullptr;  // [N, k] of w_type (f32/bf16/f16), row stride k
  core::DType w_type = core::DType::kF32;
  const float* bias = nullptr;  // [N] or null
  float* y = nullptr;           // [m_rows, ldy]
  int64_t ldy = 0;
  int64_t n_begin = 0, n_end = 0;
};

// One unit of paged attention: `rows` consecutive query tokens of one sequence times the
// `heads` query heads that share kv head `kv_head`, against context keys
// [key_begin, key_end). Query row r sits at position first_qpos + r and sees keys
// max(0, qpos - window + 1) (if window > 0) .. (causal ? qpos : kv_len - 1); keys outside
// [key_begin, key_end) are left to another unit (split-KV). Every query vector of a unit
// without a split sees at least one key (first_qpos >= 0, kv_len >= first_qpos + rows).
struct AttentionTileArgs {
  const float* q = nullptr;  // &q[row 0, head 0 of the group, 0]; row stride q_row_stride
  int64_t q_row_stride = 0;  // q_heads * head_dim
  int32_t rows = 0;
  int32_t heads = 0;  // GQA group size
  int32_t head_dim = 0;
  int32_t first_qpos = 0;
  int32_t kv_len = 0;
  bool causal = true;
  int32_t window = 0;
  float scale = 1.0f;
  int32_t key_begin = 0, key_end = 0;
  // Paged caches [num_blocks, block_size, kv_heads, head_dim] of cache_type (f32/bf16/f16).
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  core::DType cache_type = core::DType::kF32;
  int32_t kv_head = 0, kv_heads = 0, block_size = 0;
  const int32_t* block_table = nullptr;  // this sequence's row of the block table
  // Output. Final (no split): out[row r, head h] = softmax-weighted V, at
  // out + r * out_row_stride + h * head_dim. Partial (split-KV, part_acc != null): for
  // query vector i = r * heads + h: part_acc[i * head_dim ..] = unnormalised sum p*V,
  // part_max[i] = running max score (-inf when no key was visible), part_sum[i] = sum p.
  float* out = nullptr;
  int64_t out_row_stride = 0;
  float* part_acc = nullptr;
  float* part_max = nullptr;
  float* part_sum = nullptr;
  // Thread scratch of attention_scratch_floats(rows * heads, head_dim) floats.
  float* scratch = nullptr;
};

// Keys per chunk of the attention inner loop (a multiple of every ISA's vector width).
inline constexpr int32_t kAttentionKeyChunk = 32;

// Scratch floats attention_tile needs for `query_vectors` (rows * heads) of head_dim:
// scaled q and scores padded to a multiple of 8 query vectors, acc, running max/sum,
// and the K (upcast, and transposed) and V chunks.
inline int64_t attention_scratch_floats(int64_t query_vectors, int64_t head_dim) {
  const int64_t padded = (query_vectors + 7) / 8 * 8;
  return padded * head_dim + query_vectors * head_dim + 2 * query_vectors + padded * kAttentionKeyChunk +
         3 * kAttentionKeyChunk * head_dim;
}

struct KernelTable {
  CpuIsa isa = CpuIsa::kGeneric;
  void (*gemv)(const GemvArgs& a) = nullptr;
  // dst[i] = float(src[i]) for f32/bf16/f16 src.
  void (*to_f32)(const void* src, core::DType type, float* dst, int64_t n) = nullptr;
  // y = w * (x / sqrt(mean(x^2) + eps)) over n elements; y may alias x.
  void (*rms_norm_row)(const float* x, const float* w, float eps, float* y, int64_t n) = nullptr;
  // residual += x; y = rms_norm(residual). y may alias x, not residual.
  void (*add_rms_norm_row)(float* residual, const float* x, const float* w, float eps, float* y,
                           int64_t n) = nullptr;
  // NeoX rotation of `heads` vectors of length head_dim (stride head_dim) at one position:
  // v[i], v[i+half] for i < half; cos/sin [half].
  void (*rope_token)(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin,
                     int64_t half) = nullptr;
  // out[i] = silu(gate[i]) * up[i].
  void (*silu_mul_row)(const float* gate, const float* up, float* out, int64_t n) = nullptr;
  // a[i] += b[i].
  void (*add_row)(float* a, const float* b, int64_t n) = nullptr;
  void (*attention_tile)(const AttentionTileArgs& a) = nullptr;
};

// The table for `isa`, or null when this build or this CPU does not support it.
// kAuto picks the best supported one (never null).
const KernelTable* kernel_table(CpuIsa isa);

// Per-ISA tables (defined in kernels_<isa>.cpp). Each returns null if its translation
// unit was built without that instruction set; call only after checking the CPU.
const KernelTable* generic_kernel_table();
const KernelTable* avx2_kernel_table();
const KernelTable* avx512_kernel_table();

}  // namespace loom::backends::cpu
