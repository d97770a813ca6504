// Internal to the GPU sampler (sampling_raw.cu, sampling_select.cu): the batch as kernels see it,
// the workspace layout, and block-wide helpers.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "backends/cuda/kernel_utils.cuh"
#include "backends/cuda/sampling.h"
#include "core/status.h"

namespace loom::backends::cuda::detail {

inline constexpr float kNegInf = -__builtin_huge_valf();

// Per-row statistics of the raw logits, written by the raw pass.
struct RawStats {
  float max;      // max raw logit (-inf if every logit is -inf)
  float log_sum;  // log(sum(exp(x - max))), double-accumulated then rounded to f32
};

// The batch as passed to kernels (by value).
struct DeviceBatch {
  const SamplingRowParams* params;
  const double* uniforms;
  int32_t rows, vocab;
  int64_t work_stride;  // elements between rows of `work` (vocab rounded up to 8)
  float* work;          // [rows, work_stride] f32: the rows that need processing
  RawStats* stats;      // [rows]
  TokenHistory history;
  LogitAdjustments adjust;
  int32_t* hash_keys;    // [2 * history.total_tokens], -1 = empty
  int32_t* hash_counts;  // [2 * history.total_tokens], output occurrences per key
};

__device__ __forceinline__ bool penalties_active(const SamplingRowParams& p) {
  return p.repetition_penalty != 1.0f || p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f;
}

__device__ __forceinline__ bool row_has_history(const DeviceBatch& d, int b) {
  return d.history.total_tokens > 0 && d.history.ids != nullptr &&
         d.history.offsets[b + 1] > d.history.offsets[b];
}

__device__ __forceinline__ bool row_has_adjustments(const DeviceBatch& d, int b) {
  return d.adjust.total > 0 && d.adjust.ids != nullptr && d.adjust.offsets[b + 1] > d.adjust.offsets[b];
}

// Whether row b needs its logits copied to `work` and processed beyond the raw pass (anything but
// a plain greedy row).
__device__ __forceinline__ bool row_needs_work(const DeviceBatch& d, int b) {
  const SamplingRowParams& p = d.params[b];
  if (!p.greedy) return true;
  if (row_has_adjustments(d, b)) return true;
  return penalties_active(p) && row_has_history(d, b);
}

// (value, id) order of the sampler: higher value first, ties by lower id.
__device__ __forceinline__ bool better(float v, int32_t id, float bv, int32_t bid) {
  return v > bv || (v == bv && id < bid);
}

// Block-wide best (value, id) by `better`; every thread gets the result. sv/si hold >= 32 entries.
__device__ __forceinline__ void block_best(float& v, int32_t& id, float* sv, int32_t* si) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (better(ov, oi, v, id)) v = ov, id = oi;
  }
  __syncthreads();
  if (lane == 0) sv[warp] = v, si[warp] = id;
  __syncthreads();
  v = lane < warps ? sv[lane] : kNegInf;
  id = lane < warps ? si[lane] : INT_MAX;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, o);
    const int32_t oi = __shfl_xor_sync(0xffffffffu, id, o);
    if (better(ov, oi, v, id)) v = ov, id = oi;
  }
}

__device__ __forceinline__ int32_t block_min_int(int32_t v, int32_t* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  v = lane < warps ? shared[lane] : INT_MAX;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ int32_t block_max_int(int32_t v, int32_t* shared) {
  return -block_min_int(-v, shared);  // ids are >= -1, so negation cannot overflow
}

// Exclusive prefix sum over the block (thread order); `total` gets the block's sum. shared holds
// >= 32 doubles.
__device__ __forceinline__ double block_exclusive_scan(double v, double* shared, double& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  double incl = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const double t = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += t;
  }
  __syncthreads();
  if (lane == 31) shared[warp] = incl;
  __syncthreads();
  double warp_prefix = 0.0;
  total = 0.0;
  for (int w = 0; w < warps; ++w) {
    const double s = shared[w];
    if (w < warp) warp_prefix += s;
    total += s;
  }
  return warp_prefix + incl - v;
}

// Order-preserving map of a float to uint32 (larger float -> larger key); -0 maps like +0 (they
// compare equal, so they must tie); NaN is excluded upstream.
__device__ __forceinline__ uint32_t float_key(float x) {
  const uint32_t u = x == 0.0f ? 0u : __float_as_uint(x);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_float(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

// ---- launchers (host) ---------------------------------------------------------------------------

// K4: temperature, min_p, top_k, top_p and the draw (or the argmax of greedy rows that needed
// processing), for every row with row_needs_work.
core::Status launch_select(const DeviceBatch& d, const SamplingBatch& batch, const SamplingOutputs& out,
                           cudaStream_t stream);

}  // namespace loom::backends::cuda::detail
