// Rotary embeddings in place on per-head vectors: NeoX (rotate_half) and multimodal M-RoPE.
// See kernels.h for the contract and the exact M-RoPE frequency layouts.
#include <climits>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernel_utils.cuh"
#include "backends/cuda/kernels.h"

namespace loom::backends::cuda {

using namespace detail;

namespace {

struct RopeGeometry {
  int heads = 0, head_dim = 0, half = 0;
  int64_t token_stride = 0;
  int64_t max_positions = 0;
};

struct MropeRows {
  int64_t pos_stride = 0;
  int t = 0, h = 0, w = 0;
  bool interleaved = false;
};

// Which position row (0 = t, 1 = h, 2 = w) feeds frequency index i.
__device__ __forceinline__ int mrope_row(int i, const MropeRows& m) {
  if (m.interleaved) {
    const int r = i % 3;
    if (r == 1 && i < 3 * m.h) return 1;
    if (r == 2 && i < 3 * m.w) return 2;
    return 0;
  }
  return i < m.t ? 0 : (i < m.t + m.h ? 1 : 2);
}

// One block per token; threads over (head, pair). Positions outside the table give NaN.
template <typename T, bool kMrope>
__global__ void rope_kernel(T* x, RopeGeometry g, const int32_t* __restrict__ positions, MropeRows m,
                            const float* __restrict__ cos_table, const float* __restrict__ sin_table) {
  const int64_t t = blockIdx.x;
  T* xt = x + t * g.token_stride;
  const int pairs = g.heads * g.half;
  const int32_t pos_t = kMrope ? 0 : positions[t];
  for (int idx = threadIdx.x; idx < pairs; idx += blockDim.x) {
    const int h = idx / g.half;
    const int i = idx - h * g.half;
    const int32_t pos = kMrope ? positions[mrope_row(i, m) * m.pos_stride + t] : pos_t;
    float c, s;
    if (pos >= 0 && pos < g.max_positions) {
      c = cos_table[static_cast<int64_t>(pos) * g.half + i];
      s = sin_table[static_cast<int64_t>(pos) * g.half + i];
    } else {
      c = s = __int_as_float(0x7fc00000);
    }
    T* v = xt + static_cast<int64_t>(h) * g.head_dim;
    const float a = to_f32(v[i]);
    const float b = to_f32(v[i + g.half]);
    v[i] = from_f32<T>(a * c - b * s);
    v[i + g.half] = from_f32<T>(b * c + a * s);
  }
}

core::Expected<RopeGeometry> geometry(const HeadView& x, const RopeTables& tables, const char* what) {
  const int64_t stride = x.token_stride == 0 ? x.heads * x.head_dim : x.token_stride;
  if (x.tokens < 0 || x.tokens > INT_MAX || x.heads <= 0 || x.head_dim <= 0 ||
      stride < x.heads * x.head_dim || x.heads * x.head_dim > INT_MAX) {
    return core::invalid_argument(std::string(what) + ": bad view tokens=" + std::to_string(x.tokens) +
                                  " heads=" + std::to_string(x.heads) + " head_dim=" +
                                  std::to_string(x.head_dim) + " token_stride=" + std::to_string(stride));
  }
  if (tables.rotary_dim <= 0 || tables.rotary_dim % 2 != 0 || tables.rotary_dim > x.head_dim) {
    return core::invalid_argument(std::string(what) + ": rotary_dim " + std::to_string(tables.rotary_dim) +
                                  " with head_dim " + std::to_string(x.head_dim));
  }
  if (tables.cos == nullptr || tables.sin == nullptr || tables.max_positions <= 0) {
    return core::invalid_argument(std::string(what) + ": missing cos/sin tables");
  }
  RopeGeometry g;
  g.heads = static_cast<int>(x.heads);
  g.head_dim = static_cast<int>(x.head_dim);
  g.half = tables.rotary_dim / 2;
  g.token_stride = stride;
  g.max_positions = tables.max_positions;
  return g;
}

template <bool kMrope>
core::Status launch_rope(const HeadView& x, const RopeGeometry& g, const int32_t* positions,
                         const MropeRows& m, const RopeTables& tables, cudaStream_t stream,
                         const char* what) {
  if (x.tokens == 0) return {};
  if (positions == nullptr) return core::invalid_argument(std::string(what) + ": null positions");
  const int threads = row_block_threads(static_cast<int64_t>(g.heads) * g.half, 512);
  return dispatch_half(x.dtype, what, [&](auto tag) -> core::Status {
    using T = decltype(tag);
    rope_kernel<T, kMrope><<<static_cast<unsigned>(x.tokens), threads, 0, stream>>>(
        static_cast<T*>(x.data), g, positions, m, tables.cos, tables.sin);
    LOOM_CUDA_TRY_LAUNCH("rope_kernel");
    return {};
  });
}

}  // namespace

core::Status rope_neox(const HeadView& x, const int32_t* positions, const RopeTables& tables,
                       cudaStream_t stream) {
  LOOM_ASSIGN_OR_RETURN(const RopeGeometry g, geometry(x, tables, "rope_neox"));
  return launch_rope<false>(x, g, positions, MropeRows{}, tables, stream, "rope_neox");
}

core::Status rope_mrope(const HeadView& x, const int32_t* positions, int64_t pos_stride,
                        const RopeTables& tables, const MropeSection& section, cudaStream_t stream) {
  LOOM_ASSIGN_OR_RETURN(const RopeGeometry g, geometry(x, tables, "rope_mrope"));
  if (section.t < 0 || section.h < 0 || section.w < 0) {
    return core::invalid_argument("rope_mrope: negative mrope_section");
  }
  if (!section.interleaved && section.t + section.h + section.w != g.half) {
    return core::invalid_argument("rope_mrope: mrope_section [" + std::to_string(section.t) + ", " +
                                  std::to_string(section.h) + ", " + std::to_string(section.w) +
                                  "] must sum to rotary_dim / 2 = " + std::to_string(g.half));
  }
  if (pos_stride < x.tokens) {
    return core::invalid_argument("rope_mrope: pos_stride " + std::to_string(pos_stride) + " < tokens " +
                                  std::to_string(x.tokens));
  }
  MropeRows m;
  m.pos_stride = pos_stride;
  m.t = section.t;
  m.h = section.h;
  m.w = section.w;
  m.interleaved = section.interleaved;
  return launch_rope<true>(x, g, positions, m, tables, stream, "rope_mrope");
}

}  // namespace loom::backends::cuda
