#include "backends/cpu/kernels.h"

namespace loom::backends::cpu {

namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // The AVX-512 unit also uses AVX2/FMA/F16C instructions for 256-bit halves.
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f");
#else
  return false;
#endif
}

}  // namespace

std::string_view isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAuto: return "auto";
    case CpuIsa::kGeneric: return "generic";
    case CpuIsa::kAvx2: return "avx2";
    case CpuIsa::kAvx512: return "avx512";
  }
  return "?";
}

const KernelTable* kernel_table(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kGeneric: return generic_kernel_table();
    case CpuIsa::kAvx2: return cpu_has_avx2() ? avx2_kernel_table() : nullptr;
    case CpuIsa::kAvx512: return cpu_has_avx512() ? avx512_kernel_table() : nullptr;
    case CpuIsa::kAuto: {
      if (const KernelTable* t = kernel_table(CpuIsa::kAvx512)) return t;
      if (const KernelTable* t = kernel_table(CpuIsa::kAvx2)) return t;
      return generic_kernel_table();
    }
  }
  return nullptr;
}

}  // namespace loom::backends::cpu
