// Kernel templates shared by the per-ISA translation units. Each kernels_<isa>.cpp
// defines a traits struct `I` (vector type V, kLanes, load/store/fma/... primitives) in
// an anonymous namespace, includes this header and instantiates the kernels with it.
//
// Because the ISA units are compiled with different -m flags, everything here must end
// up with internal linkage or an ISA-specific symbol: all templates take the traits type
// (internal to its unit), and no non-template inline function, std:: template, LOOM_CHECK
// or other ODR-shared inline code may be used here (the linker could otherwise keep an
// AVX-512 copy of it for the whole program). Plain C functions (expf) and non-inline
// core functions (core::f16_to_f32) are fine.
//
// NaN propagation: the vector exp keeps NaN inputs NaN, so a NaN in q/k/gate reaches
// the output as in the reference.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "core/dtype.h"

namespace loom::backends::cpu::impl {

// Element types of weights / caches.
struct F32Tag {
  using T = float;
};
struct Bf16Tag {
  using T = uint16_t;
};
struct F16Tag {
  using T = uint16_t;
};

template <class I, class Tag>
inline typename I::V vload(const typename Tag::T* p) {
  if constexpr (std::is_same_v<Tag, F32Tag>) {
    return I::load(p);
  } else if constexpr (std::is_same_v<Tag, Bf16Tag>) {
    return I::load_bf16(p);
  } else {
    return I::load_f16(p);
  }
}

template <class I, class Tag>
inline float sload(const typename Tag::T* p) {
  if constexpr (std::is_same_v<Tag, F32Tag>) {
    return *p;
  } else if constexpr (std::is_same_v<Tag, Bf16Tag>) {
    const uint32_t bits = static_cast<uint32_t>(*p) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  } else {
    return core::f16_to_f32(*p);  // out of line in core: safe to share
  }
}

template <class I>
inline float smax(float a, float b) {
  return a > b ? a : b;
}

template <class I>
inline int64_t smin64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

template <class I>
inline int64_t smax64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

// exp(x) for a vector: Cephes expf (range reduction by ln 2, degree-6 polynomial),
// ~1-2 ulp over the clamped range [-87.3, 88]; inputs below underflow to ~1e-38 (not 0),
// which is negligible for softmax and silu. NaN stays NaN (I::min/max return their
// second operand when either is NaN).
template <class I>
inline typename I::V vexp(typename I::V x) {
  using V = typename I::V;
  x = I::max(I::set1(-87.33654f), I::min(I::set1(88.0f), x));
  const V n = I::round(I::mul(x, I::set1(1.44269504088896341f)));
  V r = I::fma(n, I::set1(-0.693359375f), x);
  r = I::fma(n, I::set1(2.12194440e-4f), r);
  V p = I::set1(1.9875691500e-4f);
  p = I::fma(p, r, I::set1(1.3981999507e-3f));
  p = I::fma(p, r, I::set1(8.3334519073e-3f));
  p = I::fma(p, r, I::set1(4.1665795894e-2f));
  p = I::fma(p, r, I::set1(1.6666665459e-1f));
  p = I::fma(p, r, I::set1(5.0000001201e-1f));
  p = I::fma(p, I::mul(r, r), I::add(r, I::set1(1.0f)));
  return I::mul(p, I::pow2i(n));
}

// ---------------------------------------------------------------------------------------
// GEMV / small-M GEMM: each weight row is streamed from memory once and multiplied
// with MB activation rows held in L1. NB = 4 weight rows at a time give 4*MB
// independent FMA chains.

// The NB rows of a block are contiguous in memory but are read interleaved (NB short
// streams), which hardware prefetchers follow poorly; so while working on one block we
// prefetch the next one linearly (`ahead`, the same number of bytes per k step) into L2
// (a whole block ahead would not fit beside the current one in L1). This roughly
// doubled single-thread GEMV bandwidth from DRAM for K ~ 1000 on Zen 4.
template <class I, class W, int MB, int NB>
inline void gemv_block(const float* x, int64_t k_total, const typename W::T* w, const float* bias, float* y,
                       int64_t ldy, int64_t n, const char* ahead) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  constexpr int kStepBytes = NB * L * static_cast<int>(sizeof(typename W::T));
  V acc[MB][NB];
#pragma GCC unroll 8
  for (int i = 0; i < MB; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) acc[i][j] = I::zero();
  int64_t k = 0;
  for (; k + L <= k_total; k += L, ahead += kStepBytes) {
#pragma GCC unroll 8
    for (int b = 0; b < kStepBytes; b += 64) __builtin_prefetch(ahead + b, 0, 2);
    V wv[NB];
#pragma GCC unroll 8
    for (int j = 0; j < NB; ++j) wv[j] = vload<I, W>(w + j * k_total + k);
#pragma GCC unroll 8
    for (int i = 0; i < MB; ++i) {
      const V xv = I::load(x + i * k_total + k);
#pragma GCC unroll 8
      for (int j = 0; j < NB; ++j) acc[i][j] = I::fma(xv, wv[j], acc[i][j]);
    }
  }
  float tail[MB][NB] = {};
  for (; k < k_total; ++k)
    for (int j = 0; j < NB; ++j) {
      const float wf = sload<I, W>(w + j * k_total + k);
      for (int i = 0; i < MB; ++i) tail[i][j] += x[i * k_total + k] * wf;
    }
  for (int i = 0; i < MB; ++i)
    for (int j = 0; j < NB; ++j)
      y[i * ldy + n + j] = I::reduce_add(acc[i][j]) + tail[i][j] + (bias != nullptr ? bias[n + j] : 0.0f);
}

template <class I, class W, int MB>
inline void gemv_rows(const GemvArgs& a, int64_t m0) {
  const auto* w = static_cast<const typename W::T*>(a.w);
  const float* x = a.x + m0 * a.k;
  float* y = a.y + m0 * a.ldy;
  int64_t n = a.n_begin;
  // Prefetching past the end of the weights is harmless (prefetches never fault).
  for (; n + 4 <= a.n_end; n += 4)
    gemv_block<I, W, MB, 4>(x, a.k, w + n * a.k, a.bias, y, a.ldy, n,
                            reinterpret_cast<const char*>(w + (n + 4) * a.k));
  for (; n < a.n_end; ++n)
    gemv_block<I, W, MB, 1>(x, a.k, w + n * a.k, a.bias, y, a.ldy, n,
                            reinterpret_cast<const char*>(w + (n + 1) * a.k));
}

template <class I, class W>
void gemv_typed(const GemvArgs& a) {
  constexpr int MR = I::kGemvRows;
  static_assert(MR == 2 || MR == 4, "kGemvRows must be 2 or 4");
  // Each pass over the weight rows serves MR activation rows; for m_rows > MR the rows
  // [n_begin, n_end) are re-read from cache (callers keep that range L2-sized).
  int64_t m = 0;
  for (; m + MR <= a.m_rows; m += MR) gemv_rows<I, W, MR>(a, m);
  switch (a.m_rows - m) {
    case 3: return gemv_rows<I, W, (MR >= 4 ? 3 : 1)>(a, m);
    case 2: return gemv_rows<I, W, (MR >= 4 ? 2 : 1)>(a, m);
    case 1: return gemv_rows<I, W, 1>(a, m);
    default: return;
  }
}

template <class I>
void gemv(const GemvArgs& a) {
  switch (a.w_type) {
    case core::DType::kBF16: return gemv_typed<I, Bf16Tag>(a);
    case core::DType::kF16: return gemv_typed<I, F16Tag>(a);
    default: return gemv_typed<I, F32Tag>(a);
  }
}

template <class I, class Tag>
void to_f32_typed(const typename Tag::T* src, float* dst, int64_t n) {
  constexpr int L = I::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) I::store(dst + i, vload<I, Tag>(src + i));
  for (; i < n; ++i) dst[i] = sload<I, Tag>(src + i);
}

template <class I>
void to_f32(const void* src, core::DType type, float* dst, int64_t n) {
  switch (type) {
    case core::DType::kBF16: return to_f32_typed<I, Bf16Tag>(static_cast<const uint16_t*>(src), dst, n);
    case core::DType::kF16: return to_f32_typed<I, F16Tag>(static_cast<const uint16_t*>(src), dst, n);
    default: return to_f32_typed<I, F32Tag>(static_cast<const float*>(src), dst, n);
  }
}

// ---------------------------------------------------------------------------------------
// Row-wise elementwise kernels.

template <class I>
inline float sum_squares(const float* x, int64_t n) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  V s0 = I::zero(), s1 = I::zero();
  int64_t i = 0;
  for (; i + 2 * L <= n; i += 2 * L) {
    const V a = I::load(x + i), b = I::load(x + i + L);
    s0 = I::fma(a, a, s0);
    s1 = I::fma(b, b, s1);
  }
  for (; i + L <= n; i += L) {
    const V a = I::load(x + i);
    s0 = I::fma(a, a, s0);
  }
  float s = I::reduce_add(I::add(s0, s1));
  for (; i < n; ++i) s += x[i] * x[i];
  return s;
}

// y = w * (x * r): Qwen2RMSNorm's order (normalise, then scale by the weight).
template <class I>
inline void scale_row(const float* x, const float* w, float r, float* y, int64_t n) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  const V rv = I::set1(r);
  int64_t i = 0;
  for (; i + L <= n; i += L) I::store(y + i, I::mul(I::load(w + i), I::mul(I::load(x + i), rv)));
  for (; i < n; ++i) y[i] = w[i] * (x[i] * r);
}

template <class I>
inline float inv_rms(float sum_sq, int64_t n, float eps) {
  return 1.0f / __builtin_sqrtf(sum_sq / static_cast<float>(n) + eps);
}

template <class I>
void rms_norm_row(const float* x, const float* w, float eps, float* y, int64_t n) {
  scale_row<I>(x, w, inv_rms<I>(sum_squares<I>(x, n), n, eps), y, n);
}

template <class I>
void add_rms_norm_row(float* residual, const float* x, const float* w, float eps, float* y, int64_t n) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  V s = I::zero();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V r = I::add(I::load(residual + i), I::load(x + i));
    I::store(residual + i, r);
    s = I::fma(r, r, s);
  }
  float ss = I::reduce_add(s);
  for (; i < n; ++i) {
    residual[i] += x[i];
    ss += residual[i] * residual[i];
  }
  scale_row<I>(residual, w, inv_rms<I>(ss, n, eps), y, n);
}

template <class I>
void rope_token(float* x, int64_t heads, int64_t head_dim, const float* cos, const float* sin, int64_t half) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  for (int64_t h = 0; h < heads; ++h) {
    float* lo = x + h * head_dim;
    float* hi = lo + half;
    int64_t i = 0;
    for (; i + L <= half; i += L) {
      const V a = I::load(lo + i), b = I::load(hi + i), c = I::load(cos + i), s = I::load(sin + i);
      I::store(lo + i, I::sub(I::mul(a, c), I::mul(b, s)));
      I::store(hi + i, I::add(I::mul(b, c), I::mul(a, s)));
    }
    for (; i < half; ++i) {
      const float a = lo[i], b = hi[i];
      lo[i] = a * cos[i] - b * sin[i];
      hi[i] = b * cos[i] + a * sin[i];
    }
  }
}

template <class I>
void silu_mul_row(const float* gate, const float* up, float* out, int64_t n) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  const V one = I::set1(1.0f), zero = I::zero();
  int64_t i = 0;
  for (; i + L <= n; i += L) {
    const V g = I::load(gate + i);
    const V silu = I::div(g, I::add(one, vexp<I>(I::sub(zero, g))));
    I::store(out + i, I::mul(silu, I::load(up + i)));
  }
  for (; i < n; ++i) out[i] = gate[i] / (1.0f + __builtin_expf(-gate[i])) * up[i];
}

template <class I>
void add_row(float* a, const float* b, int64_t n) {
  constexpr int L = I::kLanes;
  int64_t i = 0;
  for (; i + L <= n; i += L) I::store(a + i, I::add(I::load(a + i), I::load(b + i)));
  for (; i < n; ++i) a[i] += b[i];
}

// ---------------------------------------------------------------------------------------
// Paged attention tile (flash-style online softmax over key chunks).
//
// Per chunk of KC keys the K rows are gathered (through the block table), upcast and
// transposed into kt [head_dim, KC], and the V rows gathered into vc [KC, head_dim]. All
// query vectors of the tile then reuse them from L1: scores for QB query vectors at
// once are QB x (KC / L) accumulator vectors fed by broadcasts of q (no horizontal sums),
// and p.V accumulates over head_dim with 4 vectors held in registers.

// s[qb][0, KC) = q[qb] . kt[:, 0, KC) for QB query vectors (rows of qs, stride d).
template <class I, int QB>
inline void scores_block(const float* qs, int64_t d, const float* kt, float* s) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  constexpr int NV = kAttentionKeyChunk / L;
  V acc[QB][NV];
#pragma GCC unroll 8
  for (int i = 0; i < QB; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) acc[i][v] = I::zero();
  for (int64_t e = 0; e < d; ++e) {
    V kv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) kv[v] = I::load(kt + e * kAttentionKeyChunk + v * L);
#pragma GCC unroll 8
    for (int i = 0; i < QB; ++i) {
      const V qv = I::set1(qs[i * d + e]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[i][v] = I::fma(qv, kv[v], acc[i][v]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < QB; ++i)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) I::store(s + i * kAttentionKeyChunk + v * L, acc[i][v]);
}

// acc[0, d) += sum_j p[j] * vc[j, 0, d) for j in [j0, j1).
template <class I>
inline void accumulate_pv(float* acc, const float* p, const float* vc, int64_t j0, int64_t j1, int64_t d) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  int64_t e = 0;
  for (; e + 4 * L <= d; e += 4 * L) {
    V a0 = I::load(acc + e), a1 = I::load(acc + e + L), a2 = I::load(acc + e + 2 * L),
      a3 = I::load(acc + e + 3 * L);
    for (int64_t j = j0; j < j1; ++j) {
      const V pj = I::set1(p[j]);
      const float* v = vc + j * d + e;
      a0 = I::fma(pj, I::load(v), a0);
      a1 = I::fma(pj, I::load(v + L), a1);
      a2 = I::fma(pj, I::load(v + 2 * L), a2);
      a3 = I::fma(pj, I::load(v + 3 * L), a3);
    }
    I::store(acc + e, a0);
    I::store(acc + e + L, a1);
    I::store(acc + e + 2 * L, a2);
    I::store(acc + e + 3 * L, a3);
  }
  for (; e + L <= d; e += L) {
    V a0 = I::load(acc + e);
    for (int64_t j = j0; j < j1; ++j) a0 = I::fma(I::set1(p[j]), I::load(vc + j * d + e), a0);
    I::store(acc + e, a0);
  }
  for (; e < d; ++e) {
    float t = acc[e];
    for (int64_t j = j0; j < j1; ++j) t += p[j] * vc[j * d + e];
    acc[e] = t;
  }
}

// Online-softmax update of one query vector with scores s[j0, j1) of the current chunk
// (overwritten with the probabilities).
template <class I>
inline void softmax_update(float* s, int64_t j0, int64_t j1, float* run_max, float* run_sum, float* acc,
                           const float* vc, int64_t d) {
  using V = typename I::V;
  constexpr int L = I::kLanes;
  float cmax = s[j0];
  for (int64_t j = j0 + 1; j < j1; ++j) cmax = smax<I>(cmax, s[j]);
  const float m_old = *run_max;
  const float m_new = smax<I>(m_old, cmax);
  if (m_new > m_old && m_old != -__builtin_inff()) {
    // Rescale what was accumulated under the old max.
    const float alpha = __builtin_expf(m_old - m_new);
    *run_sum *= alpha;
    const V av = I::set1(alpha);
    int64_t e = 0;
    for (; e + L <= d; e += L) I::store(acc + e, I::mul(I::load(acc + e), av));
    for (; e < d; ++e) acc[e] *= alpha;
  }
  *run_max = m_new;
  const V mv = I::set1(m_new);
  V psum = I::zero();
  int64_t j = j0;
  for (; j + L <= j1; j += L) {
    const V pj = vexp<I>(I::sub(I::load(s + j), mv));
    I::store(s + j, pj);
    psum = I::add(psum, pj);
  }
  float ps = I::reduce_add(psum);
  for (; j < j1; ++j) {
    s[j] = __builtin_expf(s[j] - m_new);
    ps += s[j];
  }
  *run_sum += ps;
  accumulate_pv<I>(acc, s, vc, j0, j1, d);
}

// 4-lane float vectors for the chunk transpose (vector extensions: SSE on x86 whatever
// the ISA unit, NEON elsewhere).
typedef float F4 __attribute__((vector_size(16)));
typedef int32_t I4 __attribute__((vector_size(16)));

template <class I, int A, int B, int C, int D>
inline F4 shuffle2(F4 x, F4 y) {
#if defined(__clang__)
  return __builtin_shufflevector(x, y, A, B, C, D);
#else
  return __builtin_shuffle(x, y, I4{A, B, C, D});
#endif
}

// kt[e, j] = rows[j][e] for j < KC, e < d (rows: KC f32 row pointers), 4x4 blocks at
// a time.
template <class I>
inline void transpose_chunk(const float* const* rows, int64_t d, float* kt) {
  constexpr int32_t KC = kAttentionKeyChunk;
  for (int32_t j = 0; j < KC; j += 4) {
    const float* r0 = rows[j];
    const float* r1 = rows[j + 1];
    const float* r2 = rows[j + 2];
    const float* r3 = rows[j + 3];
    int64_t e = 0;
    for (; e + 4 <= d; e += 4) {
      F4 a, b, c, dd;
      std::memcpy(&a, r0 + e, sizeof a);
      std::memcpy(&b, r1 + e, sizeof b);
      std::memcpy(&c, r2 + e, sizeof c);
      std::memcpy(&dd, r3 + e, sizeof dd);
      const F4 t0 = shuffle2<I, 0, 4, 1, 5>(a, b);   // a0 b0 a1 b1
      const F4 t1 = shuffle2<I, 0, 4, 1, 5>(c, dd);  // c0 d0 c1 d1
      const F4 t2 = shuffle2<I, 2, 6, 3, 7>(a, b);   // a2 b2 a3 b3
      const F4 t3 = shuffle2<I, 2, 6, 3, 7>(c, dd);  // c2 d2 c3 d3
      const F4 o0 = shuffle2<I, 0, 1, 4, 5>(t0, t1);
      const F4 o1 = shuffle2<I, 2, 3, 6, 7>(t0, t1);
      const F4 o2 = shuffle2<I, 0, 1, 4, 5>(t2, t3);
      const F4 o3 = shuffle2<I, 2, 3, 6, 7>(t2, t3);
      std::memcpy(kt + (e + 0) * KC + j, &o0, sizeof o0);
      std::memcpy(kt + (e + 1) * KC + j, &o1, sizeof o1);
      std::memcpy(kt + (e + 2) * KC + j, &o2, sizeof o2);
      std::memcpy(kt + (e + 3) * KC + j, &o3, sizeof o3);
    }
    for (; e < d; ++e) {
      kt[e * KC + j] = r0[e];
      kt[e * KC + j + 1] = r1[e];
      kt[e * KC + j + 2] = r2[e];
      kt[e * KC + j + 3] = r3[e];
    }
  }
}

template <class I, class C>
void attention_tile_typed(const AttentionTileArgs& a) {
  using T = typename C::T;
  constexpr int L = I::kLanes;
  constexpr int32_t KC = kAttentionKeyChunk;
  constexpr int QB = 8 * L / KC;  // query vectors per scores block: 8 accumulator vectors
  static_assert(KC % L == 0 && QB >= 1, "key chunk must be a multiple of the vector width");
  const int64_t d = a.head_dim;
  const int64_t nq = int64_t{a.rows} * a.heads;  // query vectors, i = r * heads + h
  const int64_t nq_pad = (nq + QB - 1) / QB * QB;
  // Scratch layout (attention_scratch_floats): see kernels.h.
  float* qs = a.scratch;          // [nq_pad, d] q * scale (padding rows zero)
  float* acc = qs + nq_pad * d;   // [nq, d] unnormalised output
  float* run_max = acc + nq * d;  // [nq]
  float* run_sum = run_max + nq;  // [nq]
  float* sc = run_sum + nq;       // [nq_pad, KC] scores of the current chunk
  float* kt = sc + nq_pad * KC;   // [d, KC] K chunk, transposed
  float* vc = kt + d * KC;        // [KC, d] V chunk
  float* kf = vc + KC * d;        // [KC, d] K chunk upcast (16-bit caches only)
  const float* krows[KC];
  const T* kcache = static_cast<const T*>(a.k_cache);
  const T* vcache = static_cast<const T*>(a.v_cache);

  for (int32_t r = 0; r < a.rows; ++r)
    for (int32_t h = 0; h < a.heads; ++h) {
      const float* src = a.q + r * a.q_row_stride + int64_t{h} * d;
      float* dst = qs + (int64_t{r} * a.heads + h) * d;
      for (int64_t e = 0; e < d; ++e) dst[e] = src[e] * a.scale;
    }
  for (int64_t i = nq * d; i < nq_pad * d; ++i) qs[i] = 0.0f;
  for (int64_t i = 0; i < nq * d; ++i) acc[i] = 0.0f;
  for (int64_t i = 0; i < nq; ++i) {
    run_max[i] = -__builtin_inff();
    run_sum[i] = 0.0f;
  }

  for (int64_t c0 = a.key_begin; c0 < a.key_end; c0 += KC) {
    const int64_t c1 = smin64<I>(c0 + KC, a.key_end);
    const int64_t n = c1 - c0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t t = c0 + j;
      const int64_t slot = int64_t{a.block_table[t / a.block_size]} * a.block_size + t % a.block_size;
      const T* krow = kcache + (slot * a.kv_heads + a.kv_head) * d;
      const T* vrow = vcache + (slot * a.kv_heads + a.kv_head) * d;
      if constexpr (std::is_same_v<C, F32Tag>) {
        krows[j] = krow;
      } else {
        to_f32_typed<I, C>(krow, kf + j * d, d);
        krows[j] = kf + j * d;
      }
      to_f32_typed<I, C>(vrow, vc + j * d, d);
    }
    // Columns past the chunk's keys repeat key 0: finite scores that nobody reads.
    for (int64_t j = n; j < KC; ++j) krows[j] = krows[0];
    transpose_chunk<I>(krows, d, kt);
    for (int64_t qi = 0; qi < nq_pad; qi += QB) scores_block<I, QB>(qs + qi * d, d, kt, sc + qi * KC);

    for (int32_t r = 0; r < a.rows; ++r) {
      const int64_t qpos = int64_t{a.first_qpos} + r;
      const int64_t lo = a.window > 0 ? smax64<I>(0, qpos - a.window + 1) : 0;
      const int64_t hi = a.causal ? qpos + 1 : a.kv_len;  // exclusive
      const int64_t j0 = smax64<I>(c0, lo) - c0, j1 = smin64<I>(c1, hi) - c0;
      if (j0 >= j1) continue;
      for (int32_t h = 0; h < a.heads; ++h) {
        const int64_t qi = int64_t{r} * a.heads + h;
        softmax_update<I>(sc + qi * KC, j0, j1, run_max + qi, run_sum + qi, acc + qi * d, vc, d);
      }
    }
  }

  if (a.part_acc != nullptr) {
    for (int64_t i = 0; i < nq * d; ++i) a.part_acc[i] = acc[i];
    for (int64_t i = 0; i < nq; ++i) {
      a.part_max[i] = run_max[i];
      a.part_sum[i] = run_sum[i];
    }
    return;
  }
  for (int32_t r = 0; r < a.rows; ++r)
    for (int32_t h = 0; h < a.heads; ++h) {
      const int64_t qi = int64_t{r} * a.heads + h;
      const float inv = 1.0f / run_sum[qi];
      const float* src = acc + qi * d;
      float* dst = a.out + r * a.out_row_stride + int64_t{h} * d;
      for (int64_t e = 0; e < d; ++e) dst[e] = src[e] * inv;
    }
}

template <class I>
void attention_tile(const AttentionTileArgs& a) {
  switch (a.cache_type) {
    case core::DType::kBF16: return attention_tile_typed<I, Bf16Tag>(a);
    case core::DType::kF16: return attention_tile_typed<I, F16Tag>(a);
    default: return attention_tile_typed<I, F32Tag>(a);
  }
}

template <class I>
constexpr KernelTable make_table(CpuIsa isa) {
  KernelTable t;
  t.isa = isa;
  t.gemv = &gemv<I>;
  t.to_f32 = &to_f32<I>;
  t.rms_norm_row = &rms_norm_row<I>;
  t.add_rms_norm_row = &add_rms_norm_row<I>;
  t.rope_token = &rope_token<I>;
  t.silu_mul_row = &silu_mul_row<I>;
  t.add_row = &add_row<I>;
  t.attention_tile = &attention_tile<I>;
  return t;
}

}  // namespace loom::backends::cpu::impl
