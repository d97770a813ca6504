#include "backends/cuda/cuda_check.h"

#include <cstdio>
#include <string>

namespace loom::backends::cuda {

namespace {

std::string where(const char* expr, const char* file, int line) {
  return std::string(expr) + " (" + file + ":" + std::to_string(line) + ")";
}

}  // namespace

core::Status cuda_error_status(cudaError_t err, const char* expr, const char* file, int line) {
  std::string msg = where(expr, file, line) + ": " + cudaGetErrorName(err) + ": " + cudaGetErrorString(err);
  if (err == cudaErrorMemoryAllocation) return core::resource_exhausted(std::move(msg));
  return core::internal_error(std::move(msg));
}

const char* cublas_status_name(cublasStatus_t st) {
  switch (st) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    default: return "CUBLAS_STATUS_<unknown>";
  }
}

core::Status cublas_error_status(cublasStatus_t st, const char* expr, const char* file, int line) {
  std::string msg = where(expr, file, line) + ": " + cublas_status_name(st);
  if (st == CUBLAS_STATUS_ALLOC_FAILED) return core::resource_exhausted(std::move(msg));
  if (st == CUBLAS_STATUS_NOT_SUPPORTED) return core::unsupported(std::move(msg));
  return core::internal_error(std::move(msg));
}

core::Status last_launch_status(const char* what, const char* file, int line) {
  const cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return {};
  return cuda_error_status(err, (std::string("launch of ") + what).c_str(), file, line);
}

core::Expected<int> device_count() {
  int n = 0;
  LOOM_CUDA_TRY(cudaGetDeviceCount(&n));
  return n;
}

core::Expected<DeviceInfo> device_info(int device) {
  if (device < 0) LOOM_CUDA_TRY(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  LOOM_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  DeviceInfo info;
  info.device = device;
  info.name = prop.name;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.total_memory = prop.totalGlobalMem;
  info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
  info.shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
  info.max_threads_per_block = prop.maxThreadsPerBlock;
  int current = 0;
  LOOM_CUDA_TRY(cudaGetDevice(&current));
  if (current != device) LOOM_CUDA_TRY(cudaSetDevice(device));
  size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t err = cudaMemGetInfo(&free_bytes, &total_bytes);
  if (current != device) LOOM_CUDA_TRY(cudaSetDevice(current));
  LOOM_CUDA_TRY(err);
  info.free_memory = free_bytes;
  return info;
}

std::string to_string(const DeviceInfo& info) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s (cc %d.%d, %d SMs, %.1f GiB)", info.name.c_str(), info.cc_major,
                info.cc_minor, info.sm_count,
                static_cast<double>(info.total_memory) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace loom::backends::cuda
