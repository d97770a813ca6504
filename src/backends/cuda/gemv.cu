// Small-M linear layer (decode GEMV) on tensor cores. See gemv.h for the contract and the design.
//
// Vector path, one warp, one step (32 K-elements of a 16-row tile), lane = 4 * g + t
// (g = lane / 4 in 0..7, t = lane % 4):
//   va = w[n0 + g    ][kb + 8t .. kb + 8t + 8)      one 16-byte load (8 halves)
//   vb = w[n0 + g + 8][kb + 8t .. kb + 8t + 8)      one 16-byte load
//   vx = x[g         ][kb + 8t .. kb + 8t + 8)      one 16-byte load (zeros for g >= M)
// mma.m16n8k16 computes C[16 x 8] += A[16 x 16] · B[16 x 8]. Its fragments (PTX ISA, "matrix
// fragments for mma.m16n8k16", 16-bit types) give lane (g, t):
//   A: {a0,a1} = A[g][2t, 2t+1]   {a2,a3} = A[g+8][2t, 2t+1]
//      {a4,a5} = A[g][2t+8, 2t+9] {a6,a7} = A[g+8][2t+8, 2t+9]
//   B: {b0,b1} = B[2t, 2t+1][g]   {b2,b3} = B[2t+8, 2t+9][g]
//   C: c0, c1 = C[g][2t, 2t+1]    c2, c3 = C[g+8][2t, 2t+1]
// A sum over k does not care in which order the k's are numbered, as long as A and B agree. We
// number them so that each lane's own 16-byte loads are exactly its fragments: the mma's logical
// k = 2t + j (j = 0, 1) is physical kb + 8t + j and logical k = 8 + 2t + j is kb + 8t + 2 + j for
// the first mma (the .x and .y words of the loads), kb + 8t + 4 + j and kb + 8t + 6 + j for the
// second (.z and .w). Over t = 0..3 the two mmas cover kb .. kb + 31 once each. Then
//   mma #1: A = {va.x, vb.x, va.y, vb.y}, B = {vx.x, vx.y}
//   mma #2: A = {va.z, vb.z, va.w, vb.w}, B = {vx.z, vx.w}
// and C[r][m] accumulates y[m][n0 + r] (the B columns are the x rows). Each 32-bit word holds
// the lower-indexed element in its low half, both in memory (little endian) and in the fragment.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/kernel_utils.cuh"

namespace loom::backends::cuda {

using namespace detail;

namespace {

constexpr int kTileRows = 16;  // weight rows per warp (the mma's M)
constexpr int kStepK = 32;     // K elements per warp step (4 lanes x 8 halves per row)
constexpr int kUnroll = 4;     // steps whose loads are issued together (8 x 16 B of w per lane)
constexpr int kMaxWarps = 16;  // warps per CTA, each on its own slice of K
constexpr int kScalarWarps = 4;

// ---- device helpers -----------------------------------------------------------------------------

// Weights are read exactly once: read-only path, not kept in L1; L2 fetches 256 B around each
// request (a warp reads 4 steps x 64 B = 256 B of each of its rows back to back).
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}

// x is re-read by every row tile: read-only path, cached in L1.
__device__ __forceinline__ uint4 load_cached(const void* p) {
  return __ldg(reinterpret_cast<const uint4*>(p));
}

template <typename T>
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                          uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void mma_16816<__nv_bfloat16>(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                         uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void mma_16816<__half>(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2,
                                                  uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// v if keep, else zeros (selects, not a branch).
__device__ __forceinline__ uint4 keep_or_zero(bool keep, const uint4& v) {
  return make_uint4(keep ? v.x : 0u, keep ? v.y : 0u, keep ? v.z : 0u, keep ? v.w : 0u);
}

// One step: 32 K-elements of the 16-row tile (layout in the file comment).
template <typename T>
__device__ __forceinline__ void mma_step(float (&c)[4], const uint4& va, const uint4& vb, const uint4& vx) {
  mma_16816<T>(c, va.x, vb.x, va.y, vb.y, vx.x, vx.y);
  mma_16816<T>(c, va.z, vb.z, va.w, vb.w, vx.z, vx.w);
}

// y[m][n] = round(v + bias[n]) when (m, n) is inside the output.
template <typename TOut, int M>
__device__ __forceinline__ void store_out(TOut* __restrict__ y, int64_t y_stride,
                                          const TOut* __restrict__ bias, int64_t n, int64_t row, int m,
                                          float v) {
  if (m >= M || row >= n) return;
  if (bias != nullptr) v += to_f32(bias[row]);
  y[static_cast<int64_t>(m) * y_stride + row] = from_f32<TOut>(v);
}

// ---- kernels ------------------------------------------------------------------------------------

// Grid: one CTA per 16-row tile (blockIdx.x); blockDim.x = 32 * warps, warp i takes K steps
// [i * steps_per_warp, (i + 1) * steps_per_warp) (the last warps may get fewer or none).
// Preconditions (host-checked): K % 8 == 0, x_stride % 8 == 0, x and w 16-byte aligned.
template <typename T, typename TOut, int M>
__global__ void __launch_bounds__(kMaxWarps * 32)
    gemv_mma_kernel(const T* __restrict__ x, int64_t x_stride, const T* __restrict__ w,
                    const TOut* __restrict__ bias, TOut* __restrict__ y, int64_t y_stride, int64_t n,
                    int64_t k, int steps_per_warp) {
  extern __shared__ float4 partial[];  // [warps][32] when warps > 1 (dynamic: none for one warp)
  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int warps = static_cast<int>(blockDim.x) >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t n0 = static_cast<int64_t>(blockIdx.x) * kTileRows;

  // Rows past N (the last tile) re-read row N - 1; their results are never stored.
  const int64_t row_a = min(n0 + g, n - 1), row_b = min(n0 + g + 8, n - 1);
  const T* wa = w + row_a * k + 8 * t;
  const T* wb = w + row_b * k + 8 * t;
  // B columns >= M are zeros; those lanes load row 0 (same sectors as lanes g = 0: no traffic).
  const bool has_x = g < M;
  const T* xr = x + static_cast<int64_t>(has_x ? g : 0) * x_stride + 8 * t;

  const int64_t total_steps = (k + kStepK - 1) / kStepK;
  const int64_t s_begin = static_cast<int64_t>(warp) * steps_per_warp;
  const int64_t s_end = min(s_begin + steps_per_warp, total_steps);
  const int64_t full_end = min(s_end, k / kStepK);  // steps lying wholly inside K

  float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int64_t s = s_begin;
  for (; s + kUnroll <= full_end; s += kUnroll) {
    uint4 va[kUnroll], vb[kUnroll], vx[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t off = (s + u) * kStepK;
      va[u] = load_stream(wa + off);
      vb[u] = load_stream(wb + off);
      vx[u] = keep_or_zero(has_x, load_cached(xr + off));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) mma_step<T>(c, va[u], vb[u], vx[u]);
  }
  // The rest one step at a time. The very last step of K may be partial (K % 32 in {8, 16, 24}):
  // since K % 8 == 0 a lane's 8-element chunk is wholly inside or wholly outside K; outside
  // lanes re-read their first chunk (a valid address) and feed zeros. No branches around the
  // loads: mma.sync.aligned must be reached by the whole warp converged.
  for (; s < s_end; ++s) {
    const bool inside = s * kStepK + 8 * t < k;
    const int64_t off = inside ? s * kStepK : 0;
    const uint4 va = keep_or_zero(inside, load_stream(wa + off));
    const uint4 vb = keep_or_zero(inside, load_stream(wb + off));
    const uint4 vx = keep_or_zero(inside && has_x, load_cached(xr + off));
    mma_step<T>(c, va, vb, vx);
  }

  // Split-K inside the CTA: warp 0 adds the other warps' partial tiles in warp order.
  if (warps > 1) {
    partial[warp * 32 + lane] = make_float4(c[0], c[1], c[2], c[3]);
    __syncthreads();
    if (warp != 0) return;
    for (int i = 1; i < warps; ++i) {
      const float4 p = partial[i * 32 + lane];
      c[0] += p.x, c[1] += p.y, c[2] += p.z, c[3] += p.w;
    }
  }
  // C fragment: c0, c1 = rows g, columns (x rows) 2t, 2t + 1; c2, c3 = rows g + 8.
  store_out<TOut, M>(y, y_stride, bias, n, n0 + g, 2 * t, c[0]);
  store_out<TOut, M>(y, y_stride, bias, n, n0 + g, 2 * t + 1, c[1]);
  store_out<TOut, M>(y, y_stride, bias, n, n0 + g + 8, 2 * t, c[2]);
  store_out<TOut, M>(y, y_stride, bias, n, n0 + g + 8, 2 * t + 1, c[3]);
}

// Fallback for any K, stride and alignment: one warp per weight row, lanes stride over K with
// 2-byte loads, f32 accumulators per x row, warp-shuffle sums.
template <typename T, typename TOut, int M>
__global__ void __launch_bounds__(kScalarWarps * 32)
    gemv_scalar_kernel(const T* __restrict__ x, int64_t x_stride, const T* __restrict__ w,
                       const TOut* __restrict__ bias, TOut* __restrict__ y, int64_t y_stride, int64_t n,
                       int64_t k) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kScalarWarps + (threadIdx.x >> 5);
  if (row >= n) return;  // warp-uniform
  const T* wr = w + row * k;
  float acc[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = 0.0f;
  for (int64_t kk = lane; kk < k; kk += 32) {
    const float wv = to_f32(wr[kk]);
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = fmaf(wv, to_f32(x[m * x_stride + kk]), acc[m]);
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(acc[m]);
    if (lane == 0) store_out<TOut, M>(y, y_stride, bias, n, row, m, v);
  }
}

// ---- host side ----------------------------------------------------------------------------------

// SM count of the current device, cached per device (the launch shape depends on it; the query
// is legal during stream capture, the cache just keeps it off the per-call path).
constexpr int kMaxDevices = 64;
std::atomic<int> g_sm_count[kMaxDevices];

int sm_count() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 132;
  }
  const bool cacheable = dev >= 0 && dev < kMaxDevices;
  if (cacheable) {
    const int cached = g_sm_count[dev].load(std::memory_order_relaxed);
    if (cached > 0) return cached;
  }
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || sms <= 0) {
    (void)cudaGetLastError();
    return 132;
  }
  if (cacheable) g_sm_count[dev].store(sms, std::memory_order_relaxed);
  return sms;
}

struct Shape {
  int64_t m, n, k, x_stride, y_stride;
};

std::string describe(const Shape& s) {
  return "M=" + std::to_string(s.m) + " N=" + std::to_string(s.n) + " K=" + std::to_string(s.k) +
         " x_stride=" + std::to_string(s.x_stride) + " y_stride=" + std::to_string(s.y_stride);
}

core::Status validate(const GemmArgs& a, const Shape& s) {
  if (a.in_dtype != core::DType::kBF16 && a.in_dtype != core::DType::kF16) {
    return core::invalid_argument("gemv: inputs must be bf16 or f16, got " +
                                  std::string(core::dtype_name(a.in_dtype)));
  }
  if (a.out_dtype != a.in_dtype && a.out_dtype != core::DType::kF32) {
    return core::invalid_argument("gemv: output must be " + std::string(core::dtype_name(a.in_dtype)) +
                                  " or f32, got " + std::string(core::dtype_name(a.out_dtype)));
  }
  if (s.m < 0 || s.m > kGemvMaxRows || s.n <= 0 || s.k <= 0 || s.x_stride < s.k || s.y_stride < s.n ||
      s.n > INT_MAX || s.k > INT_MAX) {
    return core::invalid_argument("gemv: bad shape " + describe(s) + " (M must be 0..8)");
  }
  if (s.m > 0 && (a.x == nullptr || a.w == nullptr || a.y == nullptr)) {
    return core::invalid_argument("gemv: null operand for " + describe(s));
  }
  return {};
}

Shape shape_of(const GemmArgs& a) {
  return Shape{a.m, a.n, a.k, a.x_stride == 0 ? a.k : a.x_stride, a.y_stride == 0 ? a.n : a.y_stride};
}

bool vector_ok(const GemmArgs& a, const Shape& s) {
  return s.k % 8 == 0 && s.x_stride % 8 == 0 && aligned16(a.x) && aligned16(a.w);
}

template <typename T, typename TOut, int M>
core::Status launch(const GemmArgs& a, const Shape& s, cudaStream_t stream) {
  const auto* x = static_cast<const T*>(a.x);
  const auto* w = static_cast<const T*>(a.w);
  const auto* bias = static_cast<const TOut*>(a.bias);
  auto* y = static_cast<TOut*>(a.y);
  if (vector_ok(a, s)) {
    // Warps per CTA: enough that the grid offers ~16 resident warps per SM (each keeps
    // kUnroll * 2 * 16 B = 128 B of weights in flight per lane), but at least ~8 steps
    // (256 K-elements) per warp so the load pipeline has something to overlap.
    const int64_t tiles = (s.n + kTileRows - 1) / kTileRows;
    const int64_t total_steps = (s.k + kStepK - 1) / kStepK;
    const int64_t want = 16 * static_cast<int64_t>(sm_count());
    int64_t warps = std::clamp<int64_t>((want + tiles - 1) / tiles, 1, kMaxWarps);
    warps = std::min<int64_t>(warps, std::max<int64_t>(1, (total_steps + 7) / 8));
    const int64_t per = (total_steps + warps - 1) / warps;
    warps = (total_steps + per - 1) / per;                                                 // no idle warps
    const size_t smem = warps > 1 ? static_cast<size_t>(warps) * 32 * sizeof(float4) : 0;  // <= 8 KB
    gemv_mma_kernel<T, TOut, M>
        <<<static_cast<unsigned>(tiles), static_cast<unsigned>(32 * warps), smem, stream>>>(
            x, s.x_stride, w, bias, y, s.y_stride, s.n, s.k, static_cast<int>(per));
  } else {
    const int64_t blocks = (s.n + kScalarWarps - 1) / kScalarWarps;
    gemv_scalar_kernel<T, TOut, M><<<static_cast<unsigned>(blocks), kScalarWarps * 32, 0, stream>>>(
        x, s.x_stride, w, bias, y, s.y_stride, s.n, s.k);
  }
  LOOM_CUDA_TRY_LAUNCH("gemv");
  return {};
}

template <typename T, typename TOut>
core::Status launch_m(const GemmArgs& a, const Shape& s, cudaStream_t stream) {
  switch (s.m) {
    case 1: return launch<T, TOut, 1>(a, s, stream);
    case 2: return launch<T, TOut, 2>(a, s, stream);
    case 3: return launch<T, TOut, 3>(a, s, stream);
    case 4: return launch<T, TOut, 4>(a, s, stream);
    case 5: return launch<T, TOut, 5>(a, s, stream);
    case 6: return launch<T, TOut, 6>(a, s, stream);
    case 7: return launch<T, TOut, 7>(a, s, stream);
    case 8: return launch<T, TOut, 8>(a, s, stream);
    default: return core::invalid_argument("gemv: M must be 1..8, got " + std::to_string(s.m));
  }
}

}  // namespace

core::Status gemv(const GemmArgs& args, cudaStream_t stream) {
  const Shape s = shape_of(args);
  LOOM_RETURN_IF_ERROR(validate(args, s));
  if (s.m == 0) return {};
  return dispatch_half(args.in_dtype, "gemv", [&](auto in) -> core::Status {
    using T = decltype(in);
    if (args.out_dtype == core::DType::kF32) return launch_m<T, float>(args, s, stream);
    return launch_m<T, T>(args, s, stream);
  });
}

bool gemv_vectorized(const GemmArgs& args) {
  const Shape s = shape_of(args);
  return s.m >= 1 && validate(args, s).ok() && vector_ok(args, s);
}

bool gemv_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("LOOM_CUDA_GEMV");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return enabled;
}

}  // namespace loom::backends::cuda
