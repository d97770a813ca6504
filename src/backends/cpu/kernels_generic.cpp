// Portable kernels: GCC/Clang vector extensions of 4 f32 lanes (SSE2 / NEON / scalar,
// whatever the baseline target offers). Always available; the fallback when the CPU has
// no AVX2.
#include <cstdint>
#include <cstring>

#include "backends/cpu/kernels.h"
#include "backends/cpu/kernels_impl.h"

namespace loom::backends::cpu {
namespace {

struct GenericIsa {
  typedef float V __attribute__((vector_size(16)));
  typedef int32_t Vi __attribute__((vector_size(16)));
  typedef uint32_t Vu __attribute__((vector_size(16)));
  typedef uint16_t Vh __attribute__((vector_size(8)));
  static constexpr int kLanes = 4;
  static constexpr int kGemvRows = 2;

  static V zero() { return V{0.0f, 0.0f, 0.0f, 0.0f}; }
  static V set1(float v) { return V{v, v, v, v}; }
  static V load(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static void store(float* p, V v) { std::memcpy(p, &v, sizeof v); }
  static V load_bf16(const uint16_t* p) {
    Vh h;
    std::memcpy(&h, p, sizeof h);
    const Vu bits = __builtin_convertvector(h, Vu) << 16;
    V v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
  }
  static V load_f16(const uint16_t* p) {
    return V{core::f16_to_f32(p[0]), core::f16_to_f32(p[1]), core::f16_to_f32(p[2]), core::f16_to_f32(p[3])};
  }
  static V add(V a, V b) { return a + b; }
  static V sub(V a, V b) { return a - b; }
  static V mul(V a, V b) { return a * b; }
  static V div(V a, V b) { return a / b; }
  static V min(V a, V b) { return a < b ? a : b; }  // b if either is NaN, like x86 minps
  static V max(V a, V b) { return a > b ? a : b; }  // b if either is NaN, like x86 maxps
  static V fma(V a, V b, V c) { return a * b + c; }
  static float reduce_add(V v) { return (v[0] + v[2]) + (v[1] + v[3]); }
  static V round(V v) {
    return V{__builtin_nearbyintf(v[0]), __builtin_nearbyintf(v[1]), __builtin_nearbyintf(v[2]),
             __builtin_nearbyintf(v[3])};
  }
  // 2^n for integral n in [-126, 127].
  static V pow2i(V n) {
    const Vi e = (__builtin_convertvector(n, Vi) + 127) << 23;
    V v;
    std::memcpy(&v, &e, sizeof v);
    return v;
  }
};

constexpr KernelTable kTable = impl::make_table<GenericIsa>(CpuIsa::kGeneric);

}  // namespace

const KernelTable* generic_kernel_table() {
  return &kTable;
}

}  // namespace loom::backends::cpu
