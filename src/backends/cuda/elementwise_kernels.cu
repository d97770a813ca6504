// Row gathers, SiLU-and-mul, GELU, KV-cache writes, casts and adds. See kernels.h for the contract.
#include <climits>
#include <cstring>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_utils.cuh"
#include "backends/cuda/kernels.h"

namespace loom::backends::cuda {

using namespace detail;

namespace {

// The widest copy unit (16, 4 or 2 bytes) that divides every size and aligns every pointer.
template <typename... Ptrs>
int copy_unit_bytes(std::initializer_list<int64_t> byte_sizes, Ptrs... ptrs) {
  for (int unit : {16, 4, 2}) {
    bool ok = true;
    for (int64_t s : byte_sizes) ok = ok && s % unit == 0;
    ((ok = ok && reinterpret_cast<uintptr_t>(ptrs) % static_cast<uintptr_t>(unit) == 0), ...);
    if (ok) return unit;
  }
  return 1;
}

// Bit pattern of a quiet NaN of `dtype` repeated over 16 bytes.
uint4 nan_pattern(core::DType dtype) {
  unsigned char bytes[16];
  if (dtype == core::DType::kF32) {
    const uint32_t v = 0x7fc00000u;
    for (int i = 0; i < 4; ++i) std::memcpy(bytes + 4 * i, &v, 4);
  } else {
    const uint16_t v = dtype == core::DType::kBF16 ? 0x7fc0u : 0x7e00u;
    for (int i = 0; i < 8; ++i) std::memcpy(bytes + 2 * i, &v, 2);
  }
  uint4 r;
  std::memcpy(&r, bytes, sizeof r);
  return r;
}

template <typename U>
U first_unit(const uint4& pattern) {
  U u;
  std::memcpy(&u, &pattern, sizeof u);
  return u;
}

// ---- gather -------------------------------------------------------------------------------------

// One block per output row; rows in units of U.
template <typename U>
__global__ void gather_rows_kernel(const U* __restrict__ table, int64_t table_rows, int64_t row_units,
                                   const int32_t* __restrict__ ids, U* __restrict__ out, U nan_unit) {
  const int64_t t = blockIdx.x;
  const int32_t id = ids[t];
  U* o = out + t * row_units;
  if (id < 0 || id >= table_rows) {
    for (int64_t j = threadIdx.x; j < row_units; j += blockDim.x) o[j] = nan_unit;
    return;
  }
  const U* src = table + static_cast<int64_t>(id) * row_units;
  for (int64_t j = threadIdx.x; j < row_units; j += blockDim.x) o[j] = src[j];
}

template <typename U>
core::Status launch_gather(const void* table, int64_t table_rows, int64_t row_bytes, const int32_t* ids,
                           int64_t count, void* out, uint4 nan, cudaStream_t stream) {
  const int64_t row_units = row_bytes / static_cast<int64_t>(sizeof(U));
  const int threads = row_block_threads(row_units, 256);
  gather_rows_kernel<U><<<static_cast<unsigned>(count), threads, 0, stream>>>(
      static_cast<const U*>(table), table_rows, row_units, ids, static_cast<U*>(out), first_unit<U>(nan));
  LOOM_CUDA_TRY_LAUNCH("gather_rows_kernel");
  return {};
}

// ---- silu_mul -----------------------------------------------------------------------------------

__device__ __forceinline__ float silu(float g) {
  return g / (1.0f + expf(-g));
}

// Grid-stride over tokens * (inter / kV) units; kV = 8 (16-byte vectors) or 1.
template <typename T, int kV>
__global__ void silu_mul_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t tokens,
                                int64_t inter) {
  const int64_t units = inter / kV;
  const int64_t total = tokens * units;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < total;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = u / units;
    const int64_t j = (u - t * units) * kV;
    const T* g = gate_up + t * 2 * inter + j;
    const T* up = g + inter;
    T* o = out + t * inter + j;
    if constexpr (kV == 8) {
      const Vec16<T> gv = load16(g), uv = load16(up);
      Vec16<T> r;
#pragma unroll
      for (int k = 0; k < 8; ++k) r.v[k] = from_f32<T>(silu(to_f32(gv.v[k])) * to_f32(uv.v[k]));
      store16(o, r);
    } else {
      *o = from_f32<T>(silu(to_f32(*g)) * to_f32(*up));
    }
  }
}

// ---- gelu ---------------------------------------------------------------------------------------

__device__ __forceinline__ float gelu_f(float v, bool tanh_approx) {
  if (tanh_approx) {
    const float k = 0.7978845608028654f;  // sqrt(2 / pi)
    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));
  }
  return 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
}

// Grid-stride over n / kV units (kV > 1: 16-byte vectors). y may alias x (one thread per element).
template <typename T, int kV>
__global__ void gelu_kernel(const T* x, T* y, int64_t n, bool tanh_approx) {
  const int64_t units = n / kV;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (kV > 1) {
      const Vec16<T> v = load16(x + u * kV);
      Vec16<T> r;
#pragma unroll
      for (int k = 0; k < kV; ++k) r.v[k] = from_f32<T>(gelu_f(to_f32(v.v[k]), tanh_approx));
      store16(y + u * kV, r);
    } else {
      y[u] = from_f32<T>(gelu_f(to_f32(x[u]), tanh_approx));
    }
  }
}

// ---- write_kv -----------------------------------------------------------------------------------

// One block per token; rows (kv_heads * head_dim elements) in units of U.
template <typename U>
__global__ void write_kv_kernel(const U* __restrict__ k, int64_t k_stride, const U* __restrict__ v,
                                int64_t v_stride, const int32_t* __restrict__ slots, U* __restrict__ k_cache,
                                U* __restrict__ v_cache, int64_t row_units, int64_t num_slots) {
  const int64_t t = blockIdx.x;
  const int64_t slot = slots[t];
  if (slot < 0) return;             // padding token
  if (slot >= num_slots) __trap();  // a bug in the slot mapping: never write out of bounds
  const U* ks = k + t * k_stride;
  const U* vs = v + t * v_stride;
  U* kd = k_cache + slot * row_units;
  U* vd = v_cache + slot * row_units;
  for (int64_t j = threadIdx.x; j < row_units; j += blockDim.x) {
    kd[j] = ks[j];
    vd[j] = vs[j];
  }
}

template <typename U>
core::Status launch_write_kv(const HeadView& k, int64_t k_stride_bytes, const HeadView& v,
                             int64_t v_stride_bytes, const int32_t* slots, const KvCacheView& c,
                             int64_t row_bytes, cudaStream_t stream) {
  constexpr int64_t u = sizeof(U);
  const int threads = row_block_threads(row_bytes / u, 256);
  write_kv_kernel<U><<<static_cast<unsigned>(k.tokens), threads, 0, stream>>>(
      static_cast<const U*>(k.data), k_stride_bytes / u, static_cast<const U*>(v.data), v_stride_bytes / u,
      slots, static_cast<U*>(c.k), static_cast<U*>(c.v), row_bytes / u, c.num_blocks * c.block_size);
  LOOM_CUDA_TRY_LAUNCH("write_kv_kernel");
  return {};
}

// ---- cast / add ---------------------------------------------------------------------------------

template <typename S, typename D>
__global__ void cast_kernel(const S* __restrict__ src, D* __restrict__ dst, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = from_f32<D>(to_f32(src[i]));
  }
}

// kVec: n % Vec16<T>::kVec == 0 and all pointers 16-byte aligned. out may alias a or b (each
// element is read and written by one thread).
template <typename T, bool kVec>
__global__ void add_kernel(const T* a, const T* b, T* out, int64_t n) {
  constexpr int kV = kVec ? Vec16<T>::kVec : 1;
  const int64_t units = n / kV;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units;
       u += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if constexpr (kVec) {
      const Vec16<T> x = load16(a + u * kV), y = load16(b + u * kV);
      Vec16<T> r;
#pragma unroll
      for (int k = 0; k < kV; ++k) r.v[k] = from_f32<T>(to_f32(x.v[k]) + to_f32(y.v[k]));
      store16(out + u * kV, r);
    } else {
      out[u] = from_f32<T>(to_f32(a[u]) + to_f32(b[u]));
    }
  }
}

}  // namespace

core::Status gather_rows(const void* table, int64_t table_rows, int64_t row_elems, core::DType dtype,
                         const int32_t* ids, int64_t count, void* out, cudaStream_t stream) {
  if (dtype != core::DType::kF32 && dtype != core::DType::kBF16 && dtype != core::DType::kF16) {
    return core::invalid_argument("gather_rows: dtype must be f32, bf16 or f16, got " +
                                  std::string(core::dtype_name(dtype)));
  }
  if (table_rows < 0 || row_elems <= 0 || count < 0 || count > INT_MAX) {
    return core::invalid_argument("gather_rows: bad shape table_rows=" + std::to_string(table_rows) +
                                  " row_elems=" + std::to_string(row_elems) +
                                  " count=" + std::to_string(count));
  }
  if (count == 0) return {};
  if (table == nullptr || ids == nullptr || out == nullptr)
    return core::invalid_argument("gather_rows: null pointer");
  const int64_t row_bytes = row_elems * static_cast<int64_t>(core::dtype_size(dtype));
  const uint4 nan = nan_pattern(dtype);
  switch (copy_unit_bytes({row_bytes}, table, out)) {
    case 16: return launch_gather<uint4>(table, table_rows, row_bytes, ids, count, out, nan, stream);
    case 4: return launch_gather<uint32_t>(table, table_rows, row_bytes, ids, count, out, nan, stream);
    case 2: return launch_gather<uint16_t>(table, table_rows, row_bytes, ids, count, out, nan, stream);
    default: return core::invalid_argument("gather_rows: misaligned pointers");
  }
}

core::Status silu_mul(const void* gate_up, void* out, int64_t tokens, int64_t inter, core::DType dtype,
                      cudaStream_t stream) {
  if (tokens < 0 || inter <= 0) {
    return core::invalid_argument("silu_mul: bad shape tokens=" + std::to_string(tokens) +
                                  " inter=" + std::to_string(inter));
  }
  if (tokens == 0) return {};
  const bool vec = inter % 8 == 0 && aligned16(gate_up) && aligned16(out);
  constexpr int kThreads = 256;
  return dispatch_half(dtype, "silu_mul", [&](auto tag) -> core::Status {
    using T = decltype(tag);
    const T* g = static_cast<const T*>(gate_up);
    T* o = static_cast<T*>(out);
    if (vec) {
      silu_mul_kernel<T, 8>
          <<<grid_for(tokens * (inter / 8), kThreads), kThreads, 0, stream>>>(g, o, tokens, inter);
    } else {
      silu_mul_kernel<T, 1><<<grid_for(tokens * inter, kThreads), kThreads, 0, stream>>>(g, o, tokens, inter);
    }
    LOOM_CUDA_TRY_LAUNCH("silu_mul_kernel");
    return {};
  });
}

core::Status gelu(const void* x, void* y, int64_t n, bool tanh_approx, core::DType dtype,
                  cudaStream_t stream) {
  if (n < 0) return core::invalid_argument("gelu: negative size");
  if (n == 0) return {};
  if (x == nullptr || y == nullptr) return core::invalid_argument("gelu: null pointer");
  constexpr int kThreads = 256;
  return dispatch_float(dtype, "gelu", [&](auto tag) -> core::Status {
    using T = decltype(tag);
    constexpr int kV = Vec16<T>::kVec;
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (n % kV == 0 && aligned16(x) && aligned16(y)) {
      gelu_kernel<T, kV><<<grid_for(n / kV, kThreads), kThreads, 0, stream>>>(xp, yp, n, tanh_approx);
    } else {
      gelu_kernel<T, 1><<<grid_for(n, kThreads), kThreads, 0, stream>>>(xp, yp, n, tanh_approx);
    }
    LOOM_CUDA_TRY_LAUNCH("gelu_kernel");
    return {};
  });
}

core::Status write_kv(const HeadView& k, const HeadView& v, const int32_t* slot_mapping,
                      const KvCacheView& cache, cudaStream_t stream) {
  if (cache.dtype != core::DType::kF32 && cache.dtype != core::DType::kBF16 &&
      cache.dtype != core::DType::kF16) {
    return core::invalid_argument("write_kv: cache dtype must be f32, bf16 or f16, got " +
                                  std::string(core::dtype_name(cache.dtype)));
  }
  if (k.dtype != cache.dtype || v.dtype != cache.dtype) {
    return core::invalid_argument("write_kv: k/v dtype must equal the cache dtype " +
                                  std::string(core::dtype_name(cache.dtype)));
  }
  if (k.tokens != v.tokens || k.heads != cache.kv_heads || v.heads != cache.kv_heads ||
      k.head_dim != cache.head_dim || v.head_dim != cache.head_dim || k.tokens < 0 || k.tokens > INT_MAX ||
      cache.kv_heads <= 0 || cache.head_dim <= 0 || cache.num_blocks < 0 || cache.block_size <= 0) {
    return core::invalid_argument(
        "write_kv: k [" + std::to_string(k.tokens) + ", " + std::to_string(k.heads) + ", " +
        std::to_string(k.head_dim) + "], v [" + std::to_string(v.tokens) + ", " + std::to_string(v.heads) +
        ", " + std::to_string(v.head_dim) + "] do not fit cache [" + std::to_string(cache.num_blocks) + ", " +
        std::to_string(cache.block_size) + ", " + std::to_string(cache.kv_heads) + ", " +
        std::to_string(cache.head_dim) + "]");
  }
  const int64_t row = cache.kv_heads * cache.head_dim;
  const int64_t k_stride = k.token_stride == 0 ? row : k.token_stride;
  const int64_t v_stride = v.token_stride == 0 ? row : v.token_stride;
  if (k_stride < row || v_stride < row)
    return core::invalid_argument("write_kv: token_stride < kv_heads * head_dim");
  if (k.tokens == 0) return {};
  if (k.data == nullptr || v.data == nullptr || cache.k == nullptr || cache.v == nullptr ||
      slot_mapping == nullptr) {
    return core::invalid_argument("write_kv: null pointer");
  }
  const int64_t es = static_cast<int64_t>(core::dtype_size(cache.dtype));
  const int64_t row_bytes = row * es, ks = k_stride * es, vs = v_stride * es;
  switch (copy_unit_bytes({row_bytes, ks, vs}, k.data, v.data, cache.k, cache.v)) {
    case 16: return launch_write_kv<uint4>(k, ks, v, vs, slot_mapping, cache, row_bytes, stream);
    case 4: return launch_write_kv<uint32_t>(k, ks, v, vs, slot_mapping, cache, row_bytes, stream);
    case 2: return launch_write_kv<uint16_t>(k, ks, v, vs, slot_mapping, cache, row_bytes, stream);
    default: return core::invalid_argument("write_kv: misaligned pointers");
  }
}

core::Status cast(const void* src, core::DType src_dtype, void* dst, core::DType dst_dtype, int64_t n,
                  cudaStream_t stream) {
  if (n < 0) return core::invalid_argument("cast: negative size");
  if (n == 0) return {};
  constexpr int kThreads = 256;
  return dispatch_float(src_dtype, "cast source", [&](auto stag) -> core::Status {
    using S = decltype(stag);
    return dispatch_float(dst_dtype, "cast destination", [&](auto dtag) -> core::Status {
      using D = decltype(dtag);
      cast_kernel<S, D><<<grid_for(n, kThreads), kThreads, 0, stream>>>(static_cast<const S*>(src),
                                                                        static_cast<D*>(dst), n);
      LOOM_CUDA_TRY_LAUNCH("cast_kernel");
      return {};
    });
  });
}

core::Status add(const void* a, const void* b, void* out, int64_t n, core::DType dtype, cudaStream_t stream) {
  if (n < 0) return core::invalid_argument("add: negative size");
  if (n == 0) return {};
  constexpr int kThreads = 256;
  return dispatch_float(dtype, "add", [&](auto tag) -> core::Status {
    using T = decltype(tag);
    constexpr int kV = Vec16<T>::kVec;
    const T* ap = static_cast<const T*>(a);
    const T* bp = static_cast<const T*>(b);
    T* op = static_cast<T*>(out);
    if (n % kV == 0 && aligned16(a) && aligned16(b) && aligned16(out)) {
      add_kernel<T, true><<<grid_for(n / kV, kThreads), kThreads, 0, stream>>>(ap, bp, op, n);
    } else {
      add_kernel<T, false><<<grid_for(n, kThreads), kThreads, 0, stream>>>(ap, bp, op, n);
    }
    LOOM_CUDA_TRY_LAUNCH("add_kernel");
    return {};
  });
}

}  // namespace loom::backends::cuda
