#include "server/backend_factory.h"

#include "backends/cpu/cpu_ops.h"
#include "ops/profiling_ops.h"
#ifdef LOOM_HAVE_CUDA
#include "backends/cuda/cuda_ops.h"
#endif

namespace loom::server {

std::string available_devices() {
#ifdef LOOM_HAVE_CUDA
  return "cpu, cuda";
#else
  return "cpu";
#endif
}

core::Expected<std::unique_ptr<ops::Ops>> make_backend(const BackendOptions& options) {
  std::unique_ptr<ops::Ops> ops;
  if (options.device == "cpu") {
    ops = backends::cpu::make_cpu_ops(options.threads);
  } else if (options.device == "cuda") {
#ifdef LOOM_HAVE_CUDA
    LOOM_ASSIGN_OR_RETURN(ops, backends::cuda::make_cuda_ops(options.gpu_memory_utilization));
#else
    return core::unsupported("this build of Loom has no CUDA backend (built without nvcc); devices: " +
                             available_devices());
#endif
  } else {
    return core::invalid_argument("unknown device '" + options.device + "' (devices: " + available_devices() +
                                  ")");
  }
  if (options.profile) ops = std::make_unique<ops::ProfilingOps>(std::move(ops));
  return ops;
}

}  // namespace loom::server
