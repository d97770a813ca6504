// RMSNorm kernels (plain, fused with the residual add, per head for q/k norm) and LayerNorm.
// See kernels.h for the contract.
#include <climits>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_utils.cuh"
#include "backends/cuda/kernels.h"

namespace loom::backends::cuda {

using namespace detail;

namespace {

// Weight dtype codes passed to kernels (a runtime switch, uniform across the block, instead of
// another template parameter: fewer instantiations, same speed for these memory-bound kernels).
enum WeightCode : int { kWeightF32 = 0, kWeightBF16 = 1, kWeightF16 = 2 };

__device__ __forceinline__ float load_weight(const void* w, int code, int64_t i) {
  if (code == kWeightF32) return static_cast<const float*>(w)[i];
  if (code == kWeightBF16) return __bfloat162float(static_cast<const __nv_bfloat16*>(w)[i]);
  return __half2float(static_cast<const __half*>(w)[i]);
}

// Eight consecutive weights starting at i (i % 8 == 0; w 16-byte aligned).
__device__ __forceinline__ void load_weight8(const void* w, int code, int64_t i, float out[8]) {
  if (code == kWeightF32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w) + i);
    const float4 a = p[0], b = p[1];
    out[0] = a.x, out[1] = a.y, out[2] = a.z, out[3] = a.w;
    out[4] = b.x, out[5] = b.y, out[6] = b.z, out[7] = b.w;
  } else if (code == kWeightBF16) {
    const Vec16<__nv_bfloat16> v = load16(static_cast<const __nv_bfloat16*>(w) + i);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = to_f32(v.v[k]);
  } else {
    const Vec16<__half> v = load16(static_cast<const __half*>(w) + i);
#pragma unroll
    for (int k = 0; k < 8; ++k) out[k] = to_f32(v.v[k]);
  }
}

// One block per row. kVec: hidden % 8 == 0 and every pointer 16-byte aligned. y may alias x.
template <typename T, bool kVec>
__global__ void rms_norm_kernel(const T* x, const void* __restrict__ w, int wcode, float eps, T* y,
                                int hidden) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  float ss = 0.0f;
  if constexpr (kVec) {
    for (int i = threadIdx.x * 8; i < hidden; i += blockDim.x * 8) {
      const Vec16<T> v = load16(xr + i);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float f = to_f32(v.v[k]);
        ss += f * f;
      }
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float f = to_f32(xr[i]);
      ss += f * f;
    }
  }
  ss = block_sum(ss, red);
  const float inv = rsqrtf(ss / static_cast<float>(hidden) + eps);
  if constexpr (kVec) {
    for (int i = threadIdx.x * 8; i < hidden; i += blockDim.x * 8) {
      const Vec16<T> v = load16(xr + i);
      float wv[8];
      load_weight8(w, wcode, i, wv);
      Vec16<T> o;
#pragma unroll
      for (int k = 0; k < 8; ++k) o.v[k] = from_f32<T>(wv[k] * (to_f32(v.v[k]) * inv));
      store16(yr + i, o);
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      yr[i] = from_f32<T>(load_weight(w, wcode, i) * (to_f32(xr[i]) * inv));
    }
  }
}

// residual = round(residual + x); y = rms_norm(residual). Each thread re-reads only what it wrote,
// so the second pass needs no barrier beyond the reduction's. y may alias x (not residual).
template <typename T, bool kVec>
__global__ void add_rms_norm_kernel(T* __restrict__ residual, const T* x, const void* __restrict__ w,
                                    int wcode, float eps, T* y, int hidden) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  T* rr = residual + row * hidden;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  float ss = 0.0f;
  if constexpr (kVec) {
    for (int i = threadIdx.x * 8; i < hidden; i += blockDim.x * 8) {
      const Vec16<T> a = load16(rr + i);
      const Vec16<T> b = load16(xr + i);
      Vec16<T> s;
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        s.v[k] = from_f32<T>(to_f32(a.v[k]) + to_f32(b.v[k]));
        const float f = to_f32(s.v[k]);
        ss += f * f;
      }
      store16(rr + i, s);
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const T s = from_f32<T>(to_f32(rr[i]) + to_f32(xr[i]));
      rr[i] = s;
      const float f = to_f32(s);
      ss += f * f;
    }
  }
  ss = block_sum(ss, red);
  const float inv = rsqrtf(ss / static_cast<float>(hidden) + eps);
  if constexpr (kVec) {
    for (int i = threadIdx.x * 8; i < hidden; i += blockDim.x * 8) {
      const Vec16<T> v = load16(rr + i);
      float wv[8];
      load_weight8(w, wcode, i, wv);
      Vec16<T> o;
#pragma unroll
      for (int k = 0; k < 8; ++k) o.v[k] = from_f32<T>(wv[k] * (to_f32(v.v[k]) * inv));
      store16(yr + i, o);
    }
  } else {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      yr[i] = from_f32<T>(load_weight(w, wcode, i) * (to_f32(rr[i]) * inv));
    }
  }
}

// One warp per head vector, in place. kVec: head_dim % 8 == 0, token_stride % 8 == 0, x aligned.
template <typename T, bool kVec>
__global__ void head_rms_norm_kernel(T* x, int64_t rows, int heads, int head_dim, int64_t token_stride,
                                     const void* __restrict__ w, int wcode, float eps) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp leaves together
  const int lane = threadIdx.x & 31;
  T* p = x + (r / heads) * token_stride + (r % heads) * static_cast<int64_t>(head_dim);
  float ss = 0.0f;
  if constexpr (kVec) {
    for (int i = lane * 8; i < head_dim; i += 32 * 8) {
      const Vec16<T> v = load16(p + i);
#pragma unroll
      for (int k = 0; k < 8; ++k) {
        const float f = to_f32(v.v[k]);
        ss += f * f;
      }
    }
  } else {
    for (int i = lane; i < head_dim; i += 32) {
      const float f = to_f32(p[i]);
      ss += f * f;
    }
  }
  ss = warp_sum(ss);
  const float inv = rsqrtf(ss / static_cast<float>(head_dim) + eps);
  if constexpr (kVec) {
    for (int i = lane * 8; i < head_dim; i += 32 * 8) {
      const Vec16<T> v = load16(p + i);
      float wv[8];
      load_weight8(w, wcode, i, wv);
      Vec16<T> o;
#pragma unroll
      for (int k = 0; k < 8; ++k) o.v[k] = from_f32<T>(wv[k] * (to_f32(v.v[k]) * inv));
      store16(p + i, o);
    }
  } else {
    for (int i = lane; i < head_dim; i += 32)
      p[i] = from_f32<T>(load_weight(w, wcode, i) * (to_f32(p[i]) * inv));
  }
}

// torch LayerNorm, one block per row, three passes over the row (shifted sum, squared deviations,
// write); the row is re-read from L1/L2. kV elements per access (16-byte vectors when kV > 1:
// hidden % kV == 0, x and y 16-byte aligned). Each thread writes only elements it read itself, after
// the reductions' barriers (x[0] is read before the first), so y may alias x. bcode < 0: no bias.
template <typename T, int kV>
__global__ void layer_norm_kernel(const T* x, const void* __restrict__ w, int wcode,
                                  const void* __restrict__ b, int bcode, float eps, T* y, int hidden) {
  __shared__ float red[32];
  const int64_t row = blockIdx.x;
  const T* xr = x + row * hidden;
  T* yr = y + row * hidden;
  auto load = [&](int i, float out[kV]) {
    if constexpr (kV > 1) {
      const Vec16<T> v = load16(xr + i);
#pragma unroll
      for (int k = 0; k < kV; ++k) out[k] = to_f32(v.v[k]);
    } else {
      out[0] = to_f32(xr[i]);
    }
  };
  // Sum of x - x[0]: the partial sums stay at the scale of the row's spread, not of its mean
  // (rows with |mean| >> std would otherwise lose ~1e-5 relative in the mean).
  const float shift = to_f32(xr[0]);
  float s = 0.0f;
  for (int i = threadIdx.x * kV; i < hidden; i += blockDim.x * kV) {
    float v[kV];
    load(i, v);
#pragma unroll
    for (int k = 0; k < kV; ++k) s += v[k] - shift;
  }
  const float mean = shift + block_sum(s, red) / static_cast<float>(hidden);
  float q = 0.0f;
  for (int i = threadIdx.x * kV; i < hidden; i += blockDim.x * kV) {
    float v[kV];
    load(i, v);
#pragma unroll
    for (int k = 0; k < kV; ++k) q += (v[k] - mean) * (v[k] - mean);
  }
  const float inv = rsqrtf(block_sum(q, red) / static_cast<float>(hidden) + eps);
  for (int i = threadIdx.x * kV; i < hidden; i += blockDim.x * kV) {
    float v[kV];
    load(i, v);
    if constexpr (kV > 1) {
      Vec16<T> o;
#pragma unroll
      for (int k = 0; k < kV; ++k) {
        const float bias = bcode >= 0 ? load_weight(b, bcode, i + k) : 0.0f;
        o.v[k] = from_f32<T>((v[k] - mean) * inv * load_weight(w, wcode, i + k) + bias);
      }
      store16(yr + i, o);
    } else {
      const float bias = bcode >= 0 ? load_weight(b, bcode, i) : 0.0f;
      yr[i] = from_f32<T>((v[0] - mean) * inv * load_weight(w, wcode, i) + bias);
    }
  }
}

core::Expected<int> weight_code(const NormWeight& w, const char* what) {
  if (w.data == nullptr) return core::invalid_argument(std::string(what) + ": null weight");
  switch (w.dtype) {
    case core::DType::kF32: return static_cast<int>(kWeightF32);
    case core::DType::kBF16: return static_cast<int>(kWeightBF16);
    case core::DType::kF16: return static_cast<int>(kWeightF16);
    default:
      return core::invalid_argument(std::string(what) + ": weight must be f32, bf16 or f16, got " +
                                    std::string(core::dtype_name(w.dtype)));
  }
}

core::Status check_rows(const char* what, int64_t rows, int64_t hidden) {
  if (rows < 0 || hidden <= 0 || hidden > INT_MAX || rows > INT_MAX) {
    return core::invalid_argument(std::string(what) + ": bad shape rows=" + std::to_string(rows) +
                                  " hidden=" + std::to_string(hidden));
  }
  return {};
}

}  // namespace

core::Status rms_norm(const void* x, const NormWeight& weight, float eps, void* y, int64_t rows,
                      int64_t hidden, core::DType dtype, cudaStream_t stream) {
  LOOM_RETURN_IF_ERROR(check_rows("rms_norm", rows, hidden));
  LOOM_ASSIGN_OR_RETURN(const int wcode, weight_code(weight, "rms_norm"));
  if (rows == 0) return {};
  const bool vec = hidden % 8 == 0 && aligned16(x) && aligned16(y) && aligned16(weight.data);
  const int threads = row_block_threads(vec ? hidden / 8 : hidden);
  return dispatch_half(dtype, "rms_norm", [&](auto tag) -> core::Status {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (vec) {
      rms_norm_kernel<T, true>
          <<<rows, threads, 0, stream>>>(xp, weight.data, wcode, eps, yp, static_cast<int>(hidden));
    } else {
      rms_norm_kernel<T, false>
          <<<rows, threads, 0, stream>>>(xp, weight.data, wcode, eps, yp, static_cast<int>(hidden));
    }
    LOOM_CUDA_TRY_LAUNCH("rms_norm_kernel");
    return {};
  });
}

core::Status add_rms_norm(void* residual, const void* x, const NormWeight& weight, float eps, void* y,
                          int64_t rows, int64_t hidden, core::DType dtype, cudaStream_t stream) {
  LOOM_RETURN_IF_ERROR(check_rows("add_rms_norm", rows, hidden));
  LOOM_ASSIGN_OR_RETURN(const int wcode, weight_code(weight, "add_rms_norm"));
  if (rows == 0) return {};
  if (y == residual) return core::invalid_argument("add_rms_norm: y must not alias residual");
  const bool vec =
      hidden % 8 == 0 && aligned16(residual) && aligned16(x) && aligned16(y) && aligned16(weight.data);
  const int threads = row_block_threads(vec ? hidden / 8 : hidden);
  return dispatch_half(dtype, "add_rms_norm", [&](auto tag) -> core::Status {
    using T = decltype(tag);
    T* rp = static_cast<T*>(residual);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (vec) {
      add_rms_norm_kernel<T, true>
          <<<rows, threads, 0, stream>>>(rp, xp, weight.data, wcode, eps, yp, static_cast<int>(hidden));
    } else {
      add_rms_norm_kernel<T, false>
          <<<rows, threads, 0, stream>>>(rp, xp, weight.data, wcode, eps, yp, static_cast<int>(hidden));
    }
    LOOM_CUDA_TRY_LAUNCH("add_rms_norm_kernel");
    return {};
  });
}

core::Status layer_norm(const void* x, const NormWeight& weight, const NormWeight& bias, float eps, void* y,
                        int64_t rows, int64_t hidden, core::DType dtype, cudaStream_t stream) {
  LOOM_RETURN_IF_ERROR(check_rows("layer_norm", rows, hidden));
  LOOM_ASSIGN_OR_RETURN(const int wcode, weight_code(weight, "layer_norm"));
  int bcode = -1;
  if (bias.data != nullptr) {
    LOOM_ASSIGN_OR_RETURN(bcode, weight_code(bias, "layer_norm bias"));
  }
  if (rows == 0) return {};
  if (x == nullptr || y == nullptr) return core::invalid_argument("layer_norm: null pointer");
  return dispatch_float(dtype, "layer_norm", [&](auto tag) -> core::Status {
    using T = decltype(tag);
    constexpr int kV = Vec16<T>::kVec;
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    const int h = static_cast<int>(hidden);
    if (hidden % kV == 0 && aligned16(x) && aligned16(y)) {
      layer_norm_kernel<T, kV><<<rows, row_block_threads(hidden / kV), 0, stream>>>(
          xp, weight.data, wcode, bias.data, bcode, eps, yp, h);
    } else {
      layer_norm_kernel<T, 1><<<rows, row_block_threads(hidden), 0, stream>>>(xp, weight.data, wcode,
                                                                              bias.data, bcode, eps, yp, h);
    }
    LOOM_CUDA_TRY_LAUNCH("layer_norm_kernel");
    return {};
  });
}

core::Status head_rms_norm(const HeadView& x, const NormWeight& weight, float eps, cudaStream_t stream) {
  const int64_t stride = x.token_stride == 0 ? x.heads * x.head_dim : x.token_stride;
  if (x.tokens < 0 || x.heads <= 0 || x.head_dim <= 0 || x.head_dim > INT_MAX || x.heads > INT_MAX ||
      stride < x.heads * x.head_dim) {
    return core::invalid_argument(
        "head_rms_norm: bad view tokens=" + std::to_string(x.tokens) + " heads=" + std::to_string(x.heads) +
        " head_dim=" + std::to_string(x.head_dim) + " token_stride=" + std::to_string(stride));
  }
  LOOM_ASSIGN_OR_RETURN(const int wcode, weight_code(weight, "head_rms_norm"));
  const int64_t rows = x.tokens * x.heads;
  if (rows == 0) return {};
  const bool vec = x.head_dim % 8 == 0 && stride % 8 == 0 && aligned16(x.data) && aligned16(weight.data);
  constexpr int kThreads = 256;  // 8 rows per block
  const int64_t blocks = (rows + kThreads / 32 - 1) / (kThreads / 32);
  if (blocks > INT_MAX) return core::invalid_argument("head_rms_norm: too many rows");
  return dispatch_half(x.dtype, "head_rms_norm", [&](auto tag) -> core::Status {
    using T = decltype(tag);
    T* p = static_cast<T*>(x.data);
    const int heads = static_cast<int>(x.heads), hd = static_cast<int>(x.head_dim);
    if (vec) {
      head_rms_norm_kernel<T, true>
          <<<blocks, kThreads, 0, stream>>>(p, rows, heads, hd, stride, weight.data, wcode, eps);
    } else {
      head_rms_norm_kernel<T, false>
          <<<blocks, kThreads, 0, stream>>>(p, rows, heads, hd, stride, weight.data, wcode, eps);
    }
    LOOM_CUDA_TRY_LAUNCH("head_rms_norm_kernel");
    return {};
  });
}

}  // namespace loom::backends::cuda
