// The fast CPU backend behind the ops::Ops interface (see cpu_backend.h for how it
// computes). Accepts exactly what ops::make_reference_ops() accepts (the shared
// ops::contract checks) and matches it within f32 rounding; tests/ops holds the bounds.
// One op at a time per instance (it owns a thread pool and scratch buffers); use one
// instance per engine thread.
#pragma once

#include <memory>

#include "backends/cpu/kernels.h"
#include "ops/ops.h"

namespace loom::backends::cpu {

struct CpuOpsOptions {
  int num_threads = 0;         // 0 = hardware concurrency (the calling thread counts as one)
  CpuIsa isa = CpuIsa::kAuto;  // kAuto = best this CPU supports; others LOOM_CHECK support
};

std::unique_ptr<ops::Ops> make_cpu_ops(int num_threads /*0 = hardware*/);
std::unique_ptr<ops::Ops> make_cpu_ops(const CpuOpsOptions& options);

}  // namespace loom::backends::cpu
