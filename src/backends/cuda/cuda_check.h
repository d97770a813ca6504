// Error handling for CUDA runtime and cuBLAS(Lt) calls, and a description of the device.
//
// Two tiers, as everywhere in Loom (ENGINEERING.md §2):
//   LOOM_CUDA_TRY(expr)   / LOOM_CUBLAS_TRY(expr)    return a core::Status from the enclosing
//                                                     function when the call fails (out of memory,
//                                                     a sticky device fault, no device): things a
//                                                     caller can report and survive or at least
//                                                     print cleanly.
//   LOOM_CUDA_CHECK(expr) / LOOM_CUBLAS_CHECK(expr)  abort through LOOM_CHECK: for calls whose
//                                                     failure means a bug (destroying a handle we
//                                                     created, a launch with a bad configuration).
// The Status message names the expression, file:line and cudaGetErrorString / the cuBLAS status
// name. cudaErrorMemoryAllocation maps to ResourceExhausted, everything else to Internal.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/check.h"
#include "core/status.h"

namespace loom::backends::cuda {

// Status for a failed CUDA runtime call (err != cudaSuccess). It does not reset the error: a
// sticky one (e.g. an illegal address in an earlier kernel) will be reported again by later calls.
core::Status cuda_error_status(cudaError_t err, const char* expr, const char* file, int line);
core::Status cublas_error_status(cublasStatus_t st, const char* expr, const char* file, int line);

// Name of a cuBLAS status ("CUBLAS_STATUS_NOT_SUPPORTED").
const char* cublas_status_name(cublasStatus_t st);

// Status of the most recent kernel launch on this thread (cudaGetLastError, which also resets a
// non-sticky launch error). `what` names the kernel in the message.
core::Status last_launch_status(const char* what, const char* file, int line);

struct DeviceInfo {
  int device = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability, e.g. 9.0 on an H200
  int sm_count = 0;
  size_t total_memory = 0;  // bytes
  size_t free_memory = 0;   // bytes free when device_info() ran
  size_t l2_bytes = 0;
  size_t shared_memory_per_block_optin = 0;  // the most dynamic shared memory one block may opt into
  int max_threads_per_block = 0;
};

// The number of CUDA devices; an Internal Status with cudaGetErrorString when there is no usable
// driver (e.g. "CUDA driver version is insufficient for CUDA runtime version" on a machine
// without a GPU).
core::Expected<int> device_count();

// Properties of `device` (-1: the current device).
core::Expected<DeviceInfo> device_info(int device = -1);

// "NVIDIA H200 (cc 9.0, 132 SMs, 139.8 GiB)".
std::string to_string(const DeviceInfo& info);

}  // namespace loom::backends::cuda

// Returns a core::Status from the enclosing function when a CUDA runtime call fails.
#define LOOM_CUDA_TRY(expr)                                                                        \
  do {                                                                                             \
    const cudaError_t loom_cuda_err_ = (expr);                                                     \
    if (loom_cuda_err_ != cudaSuccess)                                                             \
      return ::loom::backends::cuda::cuda_error_status(loom_cuda_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// Returns a core::Status from the enclosing function when a cuBLAS/cuBLASLt call fails.
#define LOOM_CUBLAS_TRY(expr)                                                                         \
  do {                                                                                                \
    const cublasStatus_t loom_cublas_st_ = (expr);                                                    \
    if (loom_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                                     \
      return ::loom::backends::cuda::cublas_error_status(loom_cublas_st_, #expr, __FILE__, __LINE__); \
  } while (0)

// Returns the launch Status of the kernel just launched (cudaGetLastError) when it failed.
#define LOOM_CUDA_TRY_LAUNCH(what)                                            \
  do {                                                                        \
    ::loom::core::Status loom_launch_st_ =                                    \
        ::loom::backends::cuda::last_launch_status(what, __FILE__, __LINE__); \
    if (!loom_launch_st_.ok()) return loom_launch_st_;                        \
  } while (0)

// Aborts (LOOM_CHECK) when a CUDA runtime call fails: for failures that can only be bugs.
#define LOOM_CUDA_CHECK(expr)                                                                         \
  do {                                                                                                \
    const cudaError_t loom_cuda_err_ = (expr);                                                        \
    LOOM_CHECK(loom_cuda_err_ == cudaSuccess) << #expr << ": " << cudaGetErrorString(loom_cuda_err_); \
  } while (0)

#define LOOM_CUBLAS_CHECK(expr)                                                          \
  do {                                                                                   \
    const cublasStatus_t loom_cublas_st_ = (expr);                                       \
    LOOM_CHECK(loom_cublas_st_ == CUBLAS_STATUS_SUCCESS)                                 \
        << #expr << ": " << ::loom::backends::cuda::cublas_status_name(loom_cublas_st_); \
  } while (0)
