// Dense linear layer through cuBLASLt:  y[M, N] = x[M, K] · w[N, K]^T (+ bias[N]).
//
// Row-major operands as everywhere in Loom (a weight is [out_features, in_features], as stored
// in checkpoints). cuBLASLt is column-major, so the call computes y^T = w · x^T: the row-major
// w [N, K] is a column-major K x N matrix used transposed, the row-major x [M, K] is a
// column-major K x M matrix used as is, and the column-major N x M result is row-major y.
//
// Numerics: x and w bf16 or f16 (the same type), products accumulated in f32
// (CUBLAS_COMPUTE_32F), y rounded once to its type: the input type, or f32 (e.g. logits for the
// sampler). The optional bias (same dtype as y) is added in the epilogue in f32 before that
// rounding (CUBLASLT_EPILOGUE_BIAS).
//
// Plans: the first call for a (M, N, K, dtypes, bias, strides, pointer alignment) key builds the
// descriptors and asks cuBLASLt's heuristic for the best algorithm within the workspace; the
// plan is cached, so later calls are one cublasLtMatmul with no allocation and no host sync.
// CUDA graphs: warm every shape up (one call outside capture) before capturing; a call whose
// plan is not cached while the stream is capturing fails with InvalidArgument rather than
// building a plan inside the capture. One Gemm (it owns one workspace) must not be used on two
// streams concurrently; give each stream its own Gemm.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "core/dtype.h"
#include "core/status.h"

namespace loom::backends::cuda {

inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

struct GemmArgs {
  const void* x = nullptr;     // [m, k] rows x_stride elements apart (x_stride >= k)
  const void* w = nullptr;     // [n, k] contiguous
  const void* bias = nullptr;  // [n] of out_dtype, or null
  void* y = nullptr;           // [m, n] rows y_stride elements apart (y_stride >= n)
  int64_t m = 0, n = 0, k = 0;
  int64_t x_stride = 0;                        // 0 => k
  int64_t y_stride = 0;                        // 0 => n
  core::DType in_dtype = core::DType::kBF16;   // x and w: kBF16 or kF16
  core::DType out_dtype = core::DType::kBF16;  // y and bias: in_dtype or kF32
};

class Gemm {
 public:
  // Creates the cuBLASLt handle and a workspace of `workspace_bytes` (cudaMalloc) on the current
  // device.
  static core::Expected<std::unique_ptr<Gemm>> create(size_t workspace_bytes = kGemmWorkspaceBytes);
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;
  ~Gemm();

  // Enqueues y = x · w^T (+ bias) on `stream`. m == 0 is a no-op. Argument errors (bad dtypes,
  // k/n <= 0, strides too small, null pointers) are InvalidArgument; cuBLASLt finding no
  // algorithm is Unsupported.
  core::Status run(const GemmArgs& args, cudaStream_t stream);

  size_t cached_plans() const { return plans_.size(); }
  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  // Everything that changes the descriptors or the algorithm choice.
  struct Key {
    int64_t m, n, k, x_stride, y_stride;
    int in_dtype, out_dtype;
    bool bias;
    int align_x, align_w, align_y, align_bias;  // pointer alignment classes (bytes, <= 256)
    auto tie() const {
      return std::tie(m, n, k, x_stride, y_stride, in_dtype, out_dtype, bias, align_x, align_w, align_y,
                      align_bias);
    }
    bool operator<(const Key& o) const { return tie() < o.tie(); }
  };
  struct Plan;

  Gemm() = default;
  core::Expected<Plan*> plan_for(const Key& key, cudaStream_t stream);
  core::Expected<std::unique_ptr<Plan>> build_plan(const Key& key);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
  std::map<Key, std::unique_ptr<Plan>> plans_;
};

}  // namespace loom::backends::cuda
