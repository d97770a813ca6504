// Internals shared by the paged-attention kernels (decode, prefill, combine): the kernel
// argument block, the split-of-context rule every kernel must agree on, and small device
// helpers (16-byte async copies, ldmatrix, mma.sync, bf16/f16 conversions).
// Included only from .cu files in this folder.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace loom::backends::cuda::attention_detail {

// Keys per shared-memory tile in both kernels; context splits are multiples of it.
constexpr int kTileKeys = 64;
// Query rows per prefill CTA (4 warps x 16 rows).
constexpr int kTileRows = 64;
// Threads per CTA of the decode and prefill kernels.
constexpr int kThreads = 128;
// Packed query rows ((token, head-in-group) pairs) per decode CTA: one mma m-tile. Sequences
// with more rows (GQA groups above 16) are split into ceil(max_q_len * group / 16) row chunks
// (grid.y), each re-reading the kv head's keys.
constexpr int kDecodeRows = 16;
constexpr float kLog2e = 1.4426950408889634f;
// The CUDA-core fallback (generic_kernel.cu) for head dims without a tensor-core kernel:
// multiples of 8 in [kGenericMinHeadDim, kGenericMaxHeadDim]; 8 packed rows per warp, CTAs of
// kGenericNarrowRows (decode-like batches) or kGenericWideRows rows.
constexpr int kGenericMinHeadDim = 8;
constexpr int kGenericMaxHeadDim = 256;
constexpr int kGenericRowsPerWarp = 8;
constexpr int kGenericNarrowRows = 16;
constexpr int kGenericWideRows = 64;

// Everything a kernel needs, passed by value. Indices that can exceed 2^31 are computed in
// int64 inside the kernels.
struct KernelArgs {
  const void* q = nullptr;        // [num_tokens, q_heads, head_dim]
  const void* k_cache = nullptr;  // [num_blocks, block_size, kv_heads, head_dim]
  const void* v_cache = nullptr;
  void* out = nullptr;      // [num_tokens, q_heads, head_dim]; written when num_splits == 1
  float* ws_o = nullptr;    // [num_splits, num_tokens, q_heads, head_dim] normalised partial outputs
  float* ws_lse = nullptr;  // [num_splits, num_tokens, q_heads] log2-sum-exp2 of scaled scores
  const int32_t* q_indptr = nullptr;
  const int32_t* kv_lens = nullptr;
  const int32_t* block_table = nullptr;
  int32_t num_seqs = 0, num_tokens = 0, q_heads = 0, kv_heads = 0, group = 0;
  int32_t block_size = 0, max_blocks_per_seq = 0, max_q_len = 0;
  int32_t num_splits = 1, head_chunks = 1, window = 0;  // head_chunks: decode row chunks
  bool causal = true;
  float scale_log2 = 0;  // scale * log2(e): scores live in the exp2 domain
};

// --- The split rule (identical in every kernel and in the combine step) ---------------------
// A sequence's visible context is [visible_lo, kv_len): the union over its queries of the
// keys they may see. It is cut into num_splits chunks of split_chunk keys (a multiple of
// kTileKeys); split j covers [lo + j * chunk, min(lo + (j + 1) * chunk, kv_len)) and exists
// iff j * chunk < vis_len. Splits that do not exist write nothing; the combine step reads
// only the first valid_splits ones.

__device__ __forceinline__ int visible_lo(int kv_len, int q_len, int window) {
  return window > 0 ? max(0, kv_len - q_len - window + 1) : 0;
}

__device__ __forceinline__ int split_chunk(int vis_len, int num_splits) {
  const int c = (vis_len + num_splits - 1) / num_splits;
  return (c + kTileKeys - 1) / kTileKeys * kTileKeys;
}

__device__ __forceinline__ int valid_splits(int vis_len, int num_splits) {
  if (vis_len <= 0) return 0;
  const int c = split_chunk(vis_len, num_splits);
  return (vis_len + c - 1) / c;
}

// --- Element conversions --------------------------------------------------------------------

template <typename T>
struct Pair;
template <>
struct Pair<__nv_bfloat16> {
  using Type = __nv_bfloat162;
  static __device__ __forceinline__ float2 to_float2(uint32_t bits) {
    __nv_bfloat162 v;
    memcpy(&v, &bits, 4);
    return __bfloat1622float2(v);
  }
  static __device__ __forceinline__ uint32_t from_floats(float lo, float hi) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return bits;
  }
};
template <>
struct Pair<__half> {
  using Type = __half2;
  static __device__ __forceinline__ float2 to_float2(uint32_t bits) {
    __half2 v;
    memcpy(&v, &bits, 4);
    return __half22float2(v);
  }
  static __device__ __forceinline__ uint32_t from_floats(float lo, float hi) {
    const __half2 v = __floats2half2_rn(lo, hi);
    uint32_t bits;
    memcpy(&bits, &v, 4);
    return bits;
  }
};

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}

// 8 elements (one 16-byte vector) to f32.
template <typename T>
__device__ __forceinline__ void unpack8(const uint4& raw, float (&f)[8]) {
  const float2 a = Pair<T>::to_float2(raw.x), b = Pair<T>::to_float2(raw.y);
  const float2 c = Pair<T>::to_float2(raw.z), d = Pair<T>::to_float2(raw.w);
  f[0] = a.x, f[1] = a.y, f[2] = b.x, f[3] = b.y, f[4] = c.x, f[5] = c.y, f[6] = d.x, f[7] = d.y;
}

// --- Async copies, ldmatrix, mma ------------------------------------------------------------

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy; when !valid the destination is zero-filled and nothing
// is read (src must still be a valid address expression).
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem, bool valid) {
  const int src_bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem),
               "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, and register i
// receives matrix i's fragment (lane l: row l/4, columns 2(l%4), 2(l%4)+1).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}
// Same, transposed: lane l receives rows 2(l%4), 2(l%4)+1 of column l/4.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

// d += a (16x16, row) * b (16x8, col), f32 accumulators.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<__half>(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                                  uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// 2^x with one MUFU.EX2 (relative error ~2^-22; -inf -> 0, denormal results flush to 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// K/V tiles: keys [kt, kt + 64) of kv head `kvh`, gathered from both paged caches into one
// shared-memory tile each ([64][stride] elements). The block-table lookups are split from the
// copies so that callers can run them a tile ahead (the copies then never wait on the table):
//   kv_row_offset: thread r < 64 computes the cache offset of key kt + r (-1 past kend) into a
//                  register, which the caller stores in a shared [64] array before a barrier;
//   issue_kv_tile: consecutive threads copy consecutive 16-byte chunks of a key row, so each
//                  warp instruction covers whole 128-byte lines (the L2 sees line requests,
//                  not 16- or 32-byte pieces); rows past kend are zero-filled, nothing read.

template <int HD>
__device__ __forceinline__ int64_t kv_row_offset(const int32_t* table, int block_size, int kv_heads, int kvh,
                                                 int kt, int kend) {
  const int kpos = kt + static_cast<int>(threadIdx.x);
  if (threadIdx.x >= kTileKeys || kpos >= kend) return -1;
  const int64_t slot = int64_t{__ldg(table + kpos / block_size)} * block_size + kpos % block_size;
  return (slot * kv_heads + kvh) * HD;
}

template <typename T, int HD>
__device__ __forceinline__ void issue_kv_tile(T* k_dst, T* v_dst, int stride, const T* k_cache,
                                              const T* v_cache, const int64_t* row_off) {
  constexpr int kChunks = HD / 8;  // 16-byte chunks per key row
  static_assert((kTileKeys * kChunks) % kThreads == 0, "whole chunks per thread");
#pragma unroll
  for (int i = 0; i < kTileKeys * kChunks / kThreads; ++i) {
    const int c = static_cast<int>(threadIdx.x) + i * kThreads;
    const int r = c / kChunks, ch = c % kChunks;
    const int64_t off = row_off[r];
    const bool valid = off >= 0;
    const int64_t src = (valid ? off : 0) + ch * 8;
    cp_async_16(k_dst + r * stride + ch * 8, k_cache + src, valid);
    cp_async_16(v_dst + r * stride + ch * 8, v_cache + src, valid);
  }
}

// One online-softmax step for the two rows (gid, gid + 8) a thread holds in m16 fragments.
// s: raw scores Q K^T of NB n-blocks (masked ones -inf), replaced by p = exp2(s * scale_log2 -
// m * scale_log2); m: running row max in raw units (-inf before the first visible key); l:
// this lane's partial row sums; o: DB n-blocks of output accumulators, rescaled by
// exp2((m_old - m_new) * scale_log2) unless no row of the warp changed its max. scale_log2 > 0.
template <int NB, int DB>
__device__ __forceinline__ void online_softmax(float (&s)[NB][4], float (&m)[2], float (&l)[2],
                                               float (&o)[DB][4], float scale_log2) {
  float alpha[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float mx = -INFINITY;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) mx = fmaxf(mx, fmaxf(s[nb][2 * i], s[nb][2 * i + 1]));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));  // the four lanes of a quad share a row
    const float m_new = fmaxf(m[i], mx);
    const float ms = m_new == -INFINITY ? 0.0f : m_new * scale_log2;  // nothing visible yet: p = 0
    alpha[i] = fast_exp2(m[i] * scale_log2 - ms);                     // 1 exactly when unchanged
    m[i] = m_new;
    float sum = 0.0f;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb) {
      s[nb][2 * i] = fast_exp2(fmaf(s[nb][2 * i], scale_log2, -ms));
      s[nb][2 * i + 1] = fast_exp2(fmaf(s[nb][2 * i + 1], scale_log2, -ms));
      sum += s[nb][2 * i] + s[nb][2 * i + 1];
    }
    l[i] = l[i] * alpha[i] + sum;
  }
  if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
    for (int b = 0; b < DB; ++b) {
      o[b][0] *= alpha[0];
      o[b][1] *= alpha[0];
      o[b][2] *= alpha[1];
      o[b][3] *= alpha[1];
    }
  }
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// --- Launchers (one .cu each; they return the launch's cudaError_t) -------------------------

// grid (num_splits, kv_heads * head_chunks, num_seqs).
cudaError_t launch_decode(const KernelArgs& a, bool bf16, int head_dim, cudaStream_t stream);
// grid (row_tiles, kv_heads, num_seqs * num_splits).
cudaError_t launch_prefill(const KernelArgs& a, bool bf16, int head_dim, int row_tiles, cudaStream_t stream);
// One warp per (token, q head): merges the valid splits into out.
cudaError_t launch_combine(const KernelArgs& a, bool bf16, int head_dim, cudaStream_t stream);

// grid (row_tiles, kv_heads, num_seqs), CTAs of kGenericWideRows (wide) or kGenericNarrowRows
// packed rows; never splits the context (writes out directly, no workspace).
cudaError_t launch_generic(const KernelArgs& a, bool bf16, int head_dim, bool wide, int row_tiles,
                           cudaStream_t stream);
// Dynamic shared memory of the generic kernel for this head_dim and tile height.
size_t generic_smem_bytes(int head_dim, bool wide);

// Dynamic shared memory of the decode kernel for this head_dim (0 if unsupported).
size_t decode_smem_bytes(int head_dim);

// Raises a kernel's dynamic shared-memory limit once per (kernel, device).
cudaError_t ensure_smem_limit(const void* kernel, int bytes);

}  // namespace loom::backends::cuda::attention_detail
