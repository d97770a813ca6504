// The CUDA implementation of ops::Ops: bf16 activations and KV cache, f32 math inside kernels,
// cuBLASLt GEMMs, the paged attention kernels; all work on one stream, memory from one arena
// sized by --gpu-memory-utilization (weights and KV persistent, activations per forward).
#pragma once

#include <memory>

#include "core/status.h"
#include "ops/ops.h"

namespace loom::backends::cuda {

// fraction: of the device's total memory Loom may hold (vLLM's --gpu-memory-utilization).
core::Expected<std::unique_ptr<ops::Ops>> make_cuda_ops(double gpu_memory_utilization);

}  // namespace loom::backends::cuda
