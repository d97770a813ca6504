// Picks the op backend for a --device flag: "cpu", or "cuda" when built with the CUDA backend.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "ops/ops.h"

namespace loom::server {

struct BackendOptions {
  std::string device = "cpu";           // cpu | cuda
  int threads = 0;                      // CPU threads (0: all cores)
  double gpu_memory_utilization = 0.9;  // fraction of GPU memory Loom may use (vLLM's flag)
  bool profile = false;                 // wrap in ops::ProfilingOps
};

core::Expected<std::unique_ptr<ops::Ops>> make_backend(const BackendOptions& options);

// Devices this build can run on, e.g. "cpu, cuda".
std::string available_devices();

}  // namespace loom::server
