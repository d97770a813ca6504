// cuBLASLt linear layer y = x · w^T (+ bias) against a double-accumulation host reference.
//
// Tolerances: inputs are exactly representable (drawn, then rounded to bf16/f16) and the
// reference uses those values in double, so the GPU error is f32 accumulation (~1e-6 relative)
// plus the single rounding of y: relative L2 below 4e-3 for bf16 output (half an ulp is 2^-9
// relative per element), 1e-3 for f16, 1e-5 for f32 output. Every output element must be written
// (outputs are poisoned with NaN first) and finite; values are compared on every element for
// small problems and on a random subset of 97 columns (plus the first and last) when M*N*K is
// large, to keep the host reference fast.
#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cuda/gemm.h"
#include "cuda_test_util.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using testing::DeviceBuffer;

struct Case {
  int64_t m, n, k;
  DType in, out;
  bool bias;
  int64_t x_stride = 0, y_stride = 0;
};

std::string name(const Case& c) {
  return "M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) + " " +
         std::string(core::dtype_name(c.in)) + "->" + std::string(core::dtype_name(c.out)) +
         (c.bias ? " +bias" : "") + " x_stride=" + std::to_string(c.x_stride) +
         " y_stride=" + std::to_string(c.y_stride);
}

double out_tolerance(DType out) {
  return out == DType::kBF16 ? 4e-3 : (out == DType::kF16 ? 1e-3 : 1e-5);
}

// Host storage of a value of `t` (f32 stored as float bits in a uint32).
void run_case(Gemm& gemm, const Case& c, std::mt19937_64& rng, cudaStream_t stream) {
  SCOPED_TRACE(name(c));
  const int64_t xs = c.x_stride == 0 ? c.k : c.x_stride;
  const int64_t ys = c.y_stride == 0 ? c.n : c.y_stride;
  // Scale inputs so |y| stays O(1) whatever K is.
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.k));
  auto x = testing::random_half(static_cast<size_t>(c.m * xs), c.in, rng, -1.0f, 1.0f);
  auto w = testing::random_half(static_cast<size_t>(c.n * c.k), c.in, rng, -scale, scale);
  const size_t out_es = core::dtype_size(c.out);
  std::vector<float> bias_f(static_cast<size_t>(c.n), 0.0f);
  std::vector<uint8_t> bias_bytes(static_cast<size_t>(c.n) * out_es);
  for (int64_t j = 0; j < c.n; ++j) {
    const float v = testing::uniform(rng, -0.5f, 0.5f);
    if (c.out == DType::kF32) {
      bias_f[j] = v;
      std::memcpy(bias_bytes.data() + j * 4, &v, 4);
    } else {
      const uint16_t b = testing::to_half_bits(v, c.out);
      bias_f[j] = testing::from_half_bits(b, c.out);
      std::memcpy(bias_bytes.data() + j * 2, &b, 2);
    }
  }
  DeviceBuffer dx(x.bits.size() * 2), dw(w.bits.size() * 2), db(bias_bytes.size()),
      dy(static_cast<size_t>(c.m * ys) * out_es);
  dx.upload(x.bits);
  dw.upload(w.bits);
  db.upload(bias_bytes);
  dy.poison();

  GemmArgs a;
  a.x = dx.get();
  a.w = dw.get();
  a.bias = c.bias ? db.get() : nullptr;
  a.y = dy.get();
  a.m = c.m, a.n = c.n, a.k = c.k;
  a.x_stride = c.x_stride, a.y_stride = c.y_stride;
  a.in_dtype = c.in, a.out_dtype = c.out;
  LOOM_ASSERT_OK(gemm.run(a, stream));
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream));

  // Every element of every row was written (padding columns beyond n stay poisoned).
  std::vector<float> y(static_cast<size_t>(c.m * c.n));
  {
    std::vector<uint8_t> raw = dy.download<uint8_t>(static_cast<size_t>(c.m * ys) * out_es);
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = 0; j < c.n; ++j) {
        const uint8_t* p = raw.data() + (i * ys + j) * out_es;
        float v;
        if (c.out == DType::kF32) {
          std::memcpy(&v, p, 4);
        } else {
          uint16_t b;
          std::memcpy(&b, p, 2);
          v = testing::from_half_bits(b, c.out);
        }
        y[i * c.n + j] = v;
      }
  }
  int64_t nonfinite = 0;
  for (float v : y) nonfinite += !std::isfinite(v);
  ASSERT_EQ(nonfinite, 0) << "unwritten or non-finite outputs";

  std::vector<int64_t> cols;
  if (c.m * c.n * c.k <= int64_t{60} << 20) {
    for (int64_t j = 0; j < c.n; ++j) cols.push_back(j);
  } else {
    cols = {0, c.n - 1};
    for (int i = 0; i < 97; ++i) cols.push_back(testing::uniform_int(rng, 0, c.n - 1));
  }
  std::vector<float> got;
  std::vector<double> ref;
  for (int64_t j : cols) {
    for (int64_t i = 0; i < c.m; ++i) {
      double acc = 0.0;
      const float* xr = x.f32.data() + i * xs;
      const float* wr = w.f32.data() + j * c.k;
      for (int64_t kk = 0; kk < c.k; ++kk) acc += static_cast<double>(xr[kk]) * wr[kk];
      if (c.bias) acc += bias_f[j];
      ref.push_back(acc);
      got.push_back(y[i * c.n + j]);
    }
  }
  const testing::Diff d = testing::compare(got, ref);
  EXPECT_EQ(d.nan, 0);
  EXPECT_LT(d.rel_l2, out_tolerance(c.out)) << testing::describe(d);
  // No single element may be off by more than a few ulps of the output scale, plus the f32
  // accumulation's own rounding (~sqrt(K) ulps of f32: cuBLASLt sums in a different order than the
  // double reference; it dominates for f32 outputs, e.g. 1.806e-6 against a 1.805e-6 bound at K=896).
  double ref_max = 0;
  for (double r : ref) ref_max = std::max(ref_max, std::abs(r));
  const double accumulation = 4 * std::sqrt(static_cast<double>(c.k)) * std::ldexp(1.0, -24) * ref_max;
  EXPECT_LE(d.max_abs, 4 * testing::ulp_rel(c.out) * ref_max + accumulation + 1e-6) << testing::describe(d);
}

class CudaGemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    auto g = Gemm::create();
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    gemm_ = std::move(*g);
    LOOM_ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  std::unique_ptr<Gemm> gemm_;
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaGemmTest, GridOfShapesBiasAndDtypes) {
  LOOM_CUDA_SEEDED_RNG(rng);
  for (DType in : {DType::kBF16, DType::kF16})
    for (int64_t m : {1, 7, 64, 257})
      for (int64_t n : {64, 896, 4864})
        for (int64_t k : {64, 896, 4864})
          for (bool bias : {false, true}) run_case(*gemm_, Case{m, n, k, in, in, bias}, rng, stream_);
}

TEST_F(CudaGemmTest, F32OutputForLogits) {
  LOOM_CUDA_SEEDED_RNG(rng);
  for (int64_t m : {1, 7, 64})
    for (bool bias : {false, true}) {
      run_case(*gemm_, Case{m, 4864, 896, DType::kBF16, DType::kF32, bias}, rng, stream_);
      run_case(*gemm_, Case{m, 1000, 64, DType::kF16, DType::kF32, bias}, rng, stream_);
    }
}

TEST_F(CudaGemmTest, OddShapesAndStrides) {
  LOOM_CUDA_SEEDED_RNG(rng);
  // Odd K/N fall back to algorithms without 16-byte vector access; strided rows model views
  // into wider activations (e.g. a slice of a fused projection).
  run_case(*gemm_, Case{5, 33, 17, DType::kBF16, DType::kBF16, true}, rng, stream_);
  run_case(*gemm_, Case{97, 130, 200, DType::kF16, DType::kF16, false}, rng, stream_);
  run_case(*gemm_, Case{7, 64, 896, DType::kBF16, DType::kBF16, true, 1024, 96}, rng, stream_);
  run_case(*gemm_, Case{64, 896, 64, DType::kBF16, DType::kF32, false, 72, 900}, rng, stream_);
}

TEST_F(CudaGemmTest, PlansAreCachedPerShape) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const size_t before = gemm_->cached_plans();
  run_case(*gemm_, Case{7, 64, 64, DType::kBF16, DType::kBF16, false}, rng, stream_);
  run_case(*gemm_, Case{7, 64, 64, DType::kBF16, DType::kBF16, false}, rng, stream_);
  EXPECT_EQ(gemm_->cached_plans(), before + 1);
  run_case(*gemm_, Case{8, 64, 64, DType::kBF16, DType::kBF16, false}, rng, stream_);
  EXPECT_EQ(gemm_->cached_plans(), before + 2);
}

TEST_F(CudaGemmTest, ArgumentErrors) {
  DeviceBuffer b(1 << 16);
  GemmArgs a;
  a.x = a.w = b.get();
  a.y = b.get();
  a.m = 4, a.n = 8, a.k = 8;
  a.in_dtype = DType::kF32;
  EXPECT_EQ(gemm_->run(a, stream_).code(), core::StatusCode::kInvalidArgument);
  a.in_dtype = DType::kBF16;
  a.out_dtype = DType::kF16;
  EXPECT_EQ(gemm_->run(a, stream_).code(), core::StatusCode::kInvalidArgument);
  a.out_dtype = DType::kBF16;
  a.x_stride = 4;  // < k
  EXPECT_EQ(gemm_->run(a, stream_).code(), core::StatusCode::kInvalidArgument);
  a.x_stride = 0;
  a.m = 0;  // empty batch: nothing to do
  LOOM_ASSERT_OK(gemm_->run(a, stream_));
}

// Warmed-up shapes replay inside a CUDA graph; an unseen shape refuses to plan during capture.
TEST_F(CudaGemmTest, GraphCaptureAfterWarmup) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const int64_t m = 7, n = 896, k = 896;
  auto x = testing::random_half(static_cast<size_t>(m * k), DType::kBF16, rng);
  auto w = testing::random_half(static_cast<size_t>(n * k), DType::kBF16, rng, -0.03f, 0.03f);
  DeviceBuffer dx(x.bits.size() * 2), dw(w.bits.size() * 2), dy(static_cast<size_t>(m * n) * 2),
      dy2(static_cast<size_t>(m * n) * 2);
  dx.upload(x.bits);
  dw.upload(w.bits);
  GemmArgs a;
  a.x = dx.get(), a.w = dw.get(), a.y = dy.get();
  a.m = m, a.n = n, a.k = k;
  LOOM_ASSERT_OK(gemm_->run(a, stream_));  // warm-up: builds the plan
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
  const std::vector<uint16_t> expect = dy.download<uint16_t>(static_cast<size_t>(m * n));

  dy.poison();
  LOOM_ASSERT_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const core::Status captured = gemm_->run(a, stream_);
  GemmArgs unseen = a;
  unseen.m = m + 1;
  unseen.y = dy2.get();
  const core::Status refused = gemm_->run(unseen, stream_);
  cudaGraph_t graph = nullptr;
  LOOM_ASSERT_CUDA(cudaStreamEndCapture(stream_, &graph));
  LOOM_ASSERT_OK(captured);
  EXPECT_EQ(refused.code(), core::StatusCode::kInvalidArgument) << refused.to_string();
  cudaGraphExec_t exec = nullptr;
  LOOM_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  for (int rep = 0; rep < 3; ++rep) LOOM_ASSERT_CUDA(cudaGraphLaunch(exec, stream_));
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
  EXPECT_EQ(dy.download<uint16_t>(static_cast<size_t>(m * n)), expect);  // deterministic replay
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

}  // namespace
}  // namespace loom::backends::cuda
