#include "backends/cuda/gemm.h"

#include <string>

#include "backends/cuda/cuda_check.h"

namespace loom::backends::cuda {

namespace {

cudaDataType_t cuda_type(core::DType t) {
  switch (t) {
    case core::DType::kBF16: return CUDA_R_16BF;
    case core::DType::kF16: return CUDA_R_16F;
    case core::DType::kF32: return CUDA_R_32F;
    default: LOOM_CHECK(false) << "no cuBLASLt type for " << core::dtype_name(t);
  }
  return CUDA_R_32F;
}

// Largest power of two (<= 256) dividing the address: what cuBLASLt's alignment preferences ask.
int alignment_class(const void* p) {
  const auto a = reinterpret_cast<uintptr_t>(p);
  int align = 256;
  while (align > 1 && (a % static_cast<uintptr_t>(align)) != 0) align /= 2;
  return align;
}

std::string dims(const GemmArgs& a) {
  return "M=" + std::to_string(a.m) + " N=" + std::to_string(a.n) + " K=" + std::to_string(a.k);
}

}  // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr;  // w: column-major K x N, used transposed
  cublasLtMatrixLayout_t b = nullptr;  // x: column-major K x M (ld = x_stride)
  cublasLtMatrixLayout_t c = nullptr;  // y: column-major N x M (ld = y_stride)
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;  // bytes the chosen algorithm needs

  ~Plan() {
    if (c != nullptr) (void)cublasLtMatrixLayoutDestroy(c);
    if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) (void)cublasLtMatmulDescDestroy(desc);
  }
};

core::Expected<std::unique_ptr<Gemm>> Gemm::create(size_t workspace_bytes) {
  std::unique_ptr<Gemm> g(new Gemm());
  LOOM_CUBLAS_TRY(cublasLtCreate(&g->handle_));
  if (workspace_bytes > 0) {
    const cudaError_t err = cudaMalloc(&g->workspace_, workspace_bytes);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      g->workspace_ = nullptr;
      return core::resource_exhausted("Gemm workspace of " + std::to_string(workspace_bytes) +
                                      " bytes: " + cudaGetErrorString(err));
    }
  }
  g->workspace_bytes_ = workspace_bytes;
  return g;
}

Gemm::~Gemm() {
  plans_.clear();  // descriptors before the handle
  if (workspace_ != nullptr) (void)cudaFree(workspace_);
  if (handle_ != nullptr) (void)cublasLtDestroy(handle_);
}

core::Expected<std::unique_ptr<Gemm::Plan>> Gemm::build_plan(const Key& key) {
  auto plan = std::make_unique<Plan>();
  const cudaDataType_t in = cuda_type(static_cast<core::DType>(key.in_dtype));
  const cudaDataType_t out = cuda_type(static_cast<core::DType>(key.out_dtype));
  LOOM_CUBLAS_TRY(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  LOOM_CUBLAS_TRY(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof trans_a));
  LOOM_CUBLAS_TRY(
      cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof trans_b));
  if (key.bias) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    LOOM_CUBLAS_TRY(
        cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi));
    // The bias has y's type (also cuBLASLt's default; stated so the contract does not hang on it).
    const cudaDataType_t bias_type = out;
    LOOM_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                   &bias_type, sizeof bias_type));
  }
  LOOM_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&plan->a, in, static_cast<uint64_t>(key.k),
                                             static_cast<uint64_t>(key.n), key.k));
  LOOM_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&plan->b, in, static_cast<uint64_t>(key.k),
                                             static_cast<uint64_t>(key.m), key.x_stride));
  LOOM_CUBLAS_TRY(cublasLtMatrixLayoutCreate(&plan->c, out, static_cast<uint64_t>(key.n),
                                             static_cast<uint64_t>(key.m), key.y_stride));

  cublasLtMatmulPreference_t pref = nullptr;
  LOOM_CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t p;
    ~PrefGuard() { (void)cublasLtMatmulPreferenceDestroy(p); }
  } guard{pref};
  const uint64_t ws = workspace_bytes_;
  LOOM_CUBLAS_TRY(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  const uint32_t align_a = static_cast<uint32_t>(key.align_w), align_b = static_cast<uint32_t>(key.align_x),
                 align_c = static_cast<uint32_t>(key.align_y);
  LOOM_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                                                       &align_a, sizeof align_a));
  LOOM_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                       &align_b, sizeof align_b));
  LOOM_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                                                       &align_c, sizeof align_c));
  LOOM_CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                                                       &align_c, sizeof align_c));

  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  LOOM_CUBLAS_TRY(cublasLtMatmulAlgoGetHeuristic(handle_, plan->desc, plan->a, plan->b, plan->c, plan->c,
                                                 pref, 1, &result, &found));
  if (found == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    return core::unsupported("cuBLASLt has no algorithm for M=" + std::to_string(key.m) +
                             " N=" + std::to_string(key.n) + " K=" + std::to_string(key.k) + " " +
                             std::string(core::dtype_name(static_cast<core::DType>(key.in_dtype))) + " -> " +
                             std::string(core::dtype_name(static_cast<core::DType>(key.out_dtype))));
  }
  plan->algo = result.algo;
  plan->workspace = result.workspaceSize;
  return plan;
}

core::Expected<Gemm::Plan*> Gemm::plan_for(const Key& key, cudaStream_t stream) {
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  LOOM_CUDA_TRY(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    return core::invalid_argument("Gemm: shape M=" + std::to_string(key.m) + " N=" + std::to_string(key.n) +
                                  " K=" + std::to_string(key.k) +
                                  " was not warmed up before CUDA graph capture");
  }
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Plan> plan, build_plan(key));
  Plan* p = plan.get();
  plans_.emplace(key, std::move(plan));
  return p;
}

core::Status Gemm::run(const GemmArgs& args, cudaStream_t stream) {
  const int64_t x_stride = args.x_stride == 0 ? args.k : args.x_stride;
  const int64_t y_stride = args.y_stride == 0 ? args.n : args.y_stride;
  if (args.in_dtype != core::DType::kBF16 && args.in_dtype != core::DType::kF16) {
    return core::invalid_argument("Gemm: inputs must be bf16 or f16, got " +
                                  std::string(core::dtype_name(args.in_dtype)));
  }
  if (args.out_dtype != args.in_dtype && args.out_dtype != core::DType::kF32) {
    return core::invalid_argument("Gemm: output must be " + std::string(core::dtype_name(args.in_dtype)) +
                                  " or f32, got " + std::string(core::dtype_name(args.out_dtype)));
  }
  if (args.m < 0 || args.n <= 0 || args.k <= 0 || x_stride < args.k || y_stride < args.n) {
    return core::invalid_argument("Gemm: bad shape " + dims(args) + " x_stride=" + std::to_string(x_stride) +
                                  " y_stride=" + std::to_string(y_stride));
  }
  if (args.m == 0) return {};
  if (args.x == nullptr || args.w == nullptr || args.y == nullptr) {
    return core::invalid_argument("Gemm: null operand for " + dims(args));
  }
  Key key{args.m,
          args.n,
          args.k,
          x_stride,
          y_stride,
          static_cast<int>(args.in_dtype),
          static_cast<int>(args.out_dtype),
          args.bias != nullptr,
          alignment_class(args.x),
          alignment_class(args.w),
          alignment_class(args.y),
          args.bias != nullptr ? alignment_class(args.bias) : 256};
  LOOM_ASSIGN_OR_RETURN(Plan * plan, plan_for(key, stream));
  if (args.bias != nullptr) {
    LOOM_CUBLAS_TRY(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &args.bias,
                                                   sizeof args.bias));
  }
  const float alpha = 1.0f, beta = 0.0f;
  LOOM_CUBLAS_TRY(cublasLtMatmul(handle_, plan->desc, &alpha, args.w, plan->a, args.x, plan->b, &beta, args.y,
                                 plan->c, args.y, plan->c, &plan->algo, workspace_, workspace_bytes_,
                                 stream));
  return {};
}

}  // namespace loom::backends::cuda
