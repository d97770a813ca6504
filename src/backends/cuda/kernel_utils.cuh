// Device-side helpers shared by the kernels of this folder: 16-byte vectors of bf16/f16/f32,
// conversions to and from f32, warp/block reductions, alignment tests, launch shapes.
// Internal to src/backends/cuda (included by .cu files only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/dtype.h"
#include "core/status.h"

namespace loom::backends::cuda::detail {

// ---- scalar conversions (f32 math, one RNE rounding on store) -----------------------------------

__device__ __forceinline__ float to_f32(float v) {
  return v;
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_f32(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_f32(float v);
template <>
__device__ __forceinline__ float from_f32<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f32<__half>(float v) {
  return __float2half_rn(v);
}

// A quiet NaN of T (bf16 0x7fc0, f16 0x7e00, f32 0x7fc00000).
template <typename T>
__device__ __forceinline__ T quiet_nan() {
  return from_f32<T>(__int_as_float(0x7fc00000));
}

// ---- 16-byte vectors ----------------------------------------------------------------------------

// kVec elements of T packed in 16 bytes (8 x bf16/f16, 4 x f32), loaded and stored as one uint4.
template <typename T>
struct alignas(16) Vec16 {
  static constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  T v[kVec];
};

template <typename T>
__device__ __forceinline__ Vec16<T> load16(const T* p) {
  Vec16<T> r;
  *reinterpret_cast<uint4*>(&r) = *reinterpret_cast<const uint4*>(p);
  return r;
}

template <typename T>
__device__ __forceinline__ void store16(T* p, const Vec16<T>& r) {
  *reinterpret_cast<uint4*>(p) = *reinterpret_cast<const uint4*>(&r);
}

// ---- reductions ---------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `shared` holds >= 32 elements; the function
// synchronises before returning, so `shared` may be reused right after.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();  // `shared` may still be read by a previous call
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  T r = lane < warps ? shared[lane] : T(0);
  r = warp_sum(r);
  return r;
}

__device__ __forceinline__ float block_max(float v, float* shared) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  float r = lane < warps ? shared[lane] : -__int_as_float(0x7f800000);
  return warp_max(r);
}

// ---- host-side helpers --------------------------------------------------------------------------

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// Calls fn(T{}) with T the CUDA type of a 16-bit float dtype (bf16 / f16); InvalidArgument else.
template <typename Fn>
core::Status dispatch_half(core::DType t, const char* what, Fn&& fn) {
  switch (t) {
    case core::DType::kBF16: return fn(__nv_bfloat16{});
    case core::DType::kF16: return fn(__half{});
    default:
      return core::invalid_argument(std::string(what) + ": dtype must be bf16 or f16, got " +
                                    std::string(core::dtype_name(t)));
  }
}

// The same for f32 / bf16 / f16.
template <typename Fn>
core::Status dispatch_float(core::DType t, const char* what, Fn&& fn) {
  switch (t) {
    case core::DType::kF32: return fn(float{});
    case core::DType::kBF16: return fn(__nv_bfloat16{});
    case core::DType::kF16: return fn(__half{});
    default:
      return core::invalid_argument(std::string(what) + ": dtype must be f32, bf16 or f16, got " +
                                    std::string(core::dtype_name(t)));
  }
}

// Grid size for a grid-stride loop over `units` items with `threads` per block.
inline int grid_for(int64_t units, int threads) {
  int64_t blocks = (units + threads - 1) / threads;
  if (blocks < 1) blocks = 1;
  if (blocks > (int64_t{1} << 16)) blocks = int64_t{1} << 16;
  return static_cast<int>(blocks);
}

inline int ceil_div(int64_t a, int64_t b) {
  return static_cast<int>((a + b - 1) / b);
}

// Threads for one block per row over `units` work items: a multiple of 32 in [32, max_threads].
inline int row_block_threads(int64_t units, int max_threads = 1024) {
  int64_t t = (units + 31) / 32 * 32;
  if (t < 32) t = 32;
  if (t > max_threads) t = max_threads;
  return static_cast<int>(t);
}

}  // namespace loom::backends::cuda::detail
