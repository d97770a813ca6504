// AVX2 + FMA + F16C kernels (8 f32 lanes). Built with -mavx2 -mfma -mf16c on x86-64
// (see CMakeLists.txt); kernel_table() calls in only when the CPU supports them.
#include "backends/cpu/kernels.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

#include <immintrin.h>

#include "backends/cpu/kernels_impl.h"

namespace loom::backends::cpu {
namespace {

struct Avx2Isa {
  using V = __m256;
  static constexpr int kLanes = 8;
  static constexpr int kGemvRows = 2;  // 2 x 4 accumulators + 4 weight vectors of 16 registers

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float v) { return _mm256_set1_ps(v); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V load_bf16(const uint16_t* p) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static V load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V min(V a, V b) { return _mm256_min_ps(a, b); }  // b if either is NaN
  static V max(V a, V b) { return _mm256_max_ps(a, b); }  // b if either is NaN
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float reduce_add(V v) {
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
  }
  static V round(V v) { return _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // 2^n for integral n in [-126, 127].
  static V pow2i(V n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
};

constexpr KernelTable kTable = impl::make_table<Avx2Isa>(CpuIsa::kAvx2);

}  // namespace

const KernelTable* avx2_kernel_table() {
  return &kTable;
}

}  // namespace loom::backends::cpu

#else

namespace loom::backends::cpu {
const KernelTable* avx2_kernel_table() {
  return nullptr;
}
}  // namespace loom::backends::cpu

#endif
