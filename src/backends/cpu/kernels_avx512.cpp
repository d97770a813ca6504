// AVX-512F kernels (16 f32 lanes). Built with -mavx512f -mavx2 -mfma -mf16c on x86-64
// (see CMakeLists.txt); kernel_table() calls in only when the CPU supports AVX-512F.
#include "backends/cpu/kernels.h"

#if defined(__AVX512F__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include "backends/cpu/kernels_impl.h"

namespace loom::backends::cpu {
namespace {

struct Avx512Isa {
  using V = __m512;
  static constexpr int kLanes = 16;
  static constexpr int kGemvRows = 4;  // 4 x 4 accumulators + 4 weight vectors of 32 registers

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V min(V a, V b) { return _mm512_min_ps(a, b); }  // b if either is NaN
  static V max(V a, V b) { return _mm512_max_ps(a, b); }  // b if either is NaN
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float reduce_add(V v) {
    const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(v),
                                    _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
  }
  static V round(V v) { return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for integral n in [-126, 127].
  static V pow2i(V n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
};

constexpr KernelTable kTable = impl::make_table<Avx512Isa>(CpuIsa::kAvx512);

}  // namespace

const KernelTable* avx512_kernel_table() {
  return &kTable;
}

}  // namespace loom::backends::cpu

#else

namespace loom::backends::cpu {
const KernelTable* avx512_kernel_table() {
  return nullptr;
}
}  // namespace loom::backends::cpu

#endif
