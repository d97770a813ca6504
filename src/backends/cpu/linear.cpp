// CpuBackend::linear: y[m, n] = x[m, k] . w[n, k] + bias.
//
// Small m (decode and short chunks, m <= kGemvMaxRows): a fused GEMV streams every
// weight byte from memory exactly once (bf16/f16 upcast in registers), with the weight
// rows split over the pool's threads; for m > 1 each task's rows are re-read from L2 for
// every block of activation rows.
// Large m (prefill): OpenBLAS sgemm. f32 weights go straight in; bf16/f16 weights are
// converted to f32 one tile of rows at a time (k*n conversion work against m*k*n of GEMM,
// amortised for m > kGemvMaxRows), so no f32 copy of the model is ever kept.
#include <cblas.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "core/check.h"

namespace loom::backends::cpu {

namespace {

// Bytes of weight rows one GEMV task streams: small enough that the tasks of a call
// spread over the threads, large enough to amortise per-task overhead. For m > the
// kernel's row block the task's rows are re-read from L2, so keep this L2-sized.
constexpr int64_t kGemvTaskBytes = 128 << 10;
// f32 elements of one converted weight tile for the sgemm path (8 MiB: stays in L3
// between conversion and use).
constexpr int64_t kWeightTileFloats = int64_t{2} << 20;

}  // namespace

void CpuBackend::linear(const LinearDesc& d) {
  LOOM_CHECK(d.x != nullptr && d.w != nullptr && d.y != nullptr) << "linear: null pointer";
  if (d.m == 0 || d.n == 0) return;
  const float* bias = as_f32(d.bias, d.bias_type, d.n, bias_buf_);
  if (d.k == 0) {  // empty reduction: y = bias (or 0)
    for (int64_t m = 0; m < d.m; ++m)
      for (int64_t n = 0; n < d.n; ++n) d.y[m * d.n + n] = bias != nullptr ? bias[n] : 0.0f;
    return;
  }
  if (d.m <= kGemvMaxRows)
    linear_gemv(d, bias);
  else
    linear_sgemm(d, bias);
}

void CpuBackend::linear_gemv(const LinearDesc& d, const float* bias) {
  const int64_t row_bytes = static_cast<int64_t>(core::element_bytes(d.w_type, static_cast<size_t>(d.k)));
  // Rows per task: at most kGemvTaskBytes of weights, and at least 4 tasks per thread
  // when there are enough rows; multiples of 4 (the kernel's row block).
  int64_t rows = std::max<int64_t>(4, kGemvTaskBytes / std::max<int64_t>(row_bytes, 1));
  rows = std::min(rows, (d.n + 4 * pool_.num_threads() - 1) / (4 * pool_.num_threads()));
  rows = std::max<int64_t>(4, (rows + 3) / 4 * 4);
  const int64_t tasks = (d.n + rows - 1) / rows;
  GemvArgs base;
  base.x = d.x;
  base.m_rows = d.m;
  base.k = d.k;
  base.w = d.w;
  base.w_type = d.w_type;
  base.bias = bias;
  base.y = d.y;
  base.ldy = d.n;
  pool_.parallel_for(tasks, [&](int64_t task, int) {
    GemvArgs a = base;
    a.n_begin = task * rows;
    a.n_end = std::min(d.n, a.n_begin + rows);
    kernels_->gemv(a);
  });
}

void CpuBackend::linear_sgemm(const LinearDesc& d, const float* bias) {
  // With a bias, y starts as the bias rows and sgemm accumulates (beta = 1); without,
  // beta = 0 (BLAS then never reads y, so stale NaNs in it cannot leak).
  float beta = 0.0f;
  if (bias != nullptr) {
    parallel_range(d.m, 16, [&](int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m)
        std::memcpy(d.y + m * d.n, bias, static_cast<size_t>(d.n) * sizeof(float));
    });
    beta = 1.0f;
  }
  const auto M = static_cast<blasint>(d.m), K = static_cast<blasint>(d.k), N = static_cast<blasint>(d.n);
  if (d.w_type == core::DType::kF32) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, d.x, K,
                static_cast<const float*>(d.w), K, beta, d.y, N);
    return;
  }
  const int64_t tile_rows = std::min(d.n, std::max<int64_t>(64, kWeightTileFloats / d.k));
  weight_tile_.resize(static_cast<size_t>(tile_rows * d.k));
  const size_t elem = core::dtype_size(d.w_type);
  for (int64_t n0 = 0; n0 < d.n; n0 += tile_rows) {
    const int64_t nb = std::min(tile_rows, d.n - n0);
    const char* src = static_cast<const char*>(d.w) + static_cast<size_t>(n0 * d.k) * elem;
    parallel_range(nb * d.k, int64_t{1} << 16, [&](int64_t i0, int64_t i1) {
      kernels_->to_f32(src + static_cast<size_t>(i0) * elem, d.w_type, weight_tile_.data() + i0, i1 - i0);
    });
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, static_cast<blasint>(nb), K, 1.0f, d.x, K,
                weight_tile_.data(), K, beta, d.y + n0, N);
  }
}

}  // namespace loom::backends::cpu
