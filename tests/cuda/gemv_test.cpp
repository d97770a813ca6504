// The decode GEMV (gemv.h) against a double-accumulation host reference.
//
// Grid: M 1..8 x N {1, 7, 64, 129, 3584, 4864} x K {8, 24, 896, 3584, 18944, 7, 13}, bf16 and f16
// inputs, y in the input type or f32, bias on/off, and five layouts per shape: contiguous;
// strided x (K + 8) and y (N + 3); x_stride K + 1 (scalar path); x misaligned by one element
// (scalar path); w misaligned by one element (scalar path, small shapes only). K = 7 and 13 take
// the scalar path everywhere. Fresh random inputs each run (seed printed, LOOM_TEST_SEED replays),
// outputs poisoned with NaN before every launch.
//
// Tolerances (same reasoning as gemm_test.cpp): inputs are exact in their 16-bit type and the
// reference sums their products in double, so the kernel's error is its f32 accumulation (tensor
// core or FMA, in a different order) plus the single rounding of y. Per element:
//   |got - ref| <= 1 ulp(y type) * |ref| + 4 * sqrt(K) * 2^-24 * sum_k |x_k w_k| + 1e-7
// (rounding is half an ulp; the accumulation term is a generous random-walk bound on f32 sums;
// 1e-7 covers f16 subnormals). Whole rows: relative L2 below 4e-3 (bf16 out), 1e-3 (f16), 1e-5 (f32).
// Also: rows >= M and the padding columns of a strided y are never written (still poisoned).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cuda/gemv.h"
#include "cuda_test_util.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using testing::DeviceBuffer;

constexpr int kMaxM = 8;

double out_tolerance(DType out) {
  return out == DType::kBF16 ? 4e-3 : (out == DType::kF16 ? 1e-3 : 1e-5);
}

// Uniform in [-scale, scale) rounded to t: one generator draw per value (the big weight matrices
// have up to 92M elements).
void fill_half(std::vector<uint16_t>& bits, size_t n, DType t, std::mt19937_64& rng, float scale) {
  bits.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const float u = static_cast<float>(rng() >> 40) * 0x1p-23f - 1.0f;  // [-1, 1)
    bits[i] = testing::to_half_bits(u * scale, t);
  }
}

// One (N, K, input dtype) problem: host data, its reference on a set of columns, device copies.
struct Problem {
  int64_t n = 0, k = 0;
  DType in = DType::kBF16;
  std::vector<uint16_t> x;  // [8, k] contiguous
  std::vector<uint16_t> w;  // [n, k]
  std::vector<int64_t> cols;
  std::vector<double> dot, abs_dot;  // [8][cols]: sum x*w and sum |x*w| in double
};

void build_problem(Problem& p, std::mt19937_64& rng) {
  // |y| stays O(1) whatever K is.
  fill_half(p.x, static_cast<size_t>(kMaxM * p.k), p.in, rng, 1.0f);
  fill_half(p.w, static_cast<size_t>(p.n * p.k), p.in, rng, 1.0f / std::sqrt(static_cast<float>(p.k)));
  p.cols.clear();
  if (p.n * p.k <= (int64_t{1} << 22)) {
    for (int64_t j = 0; j < p.n; ++j) p.cols.push_back(j);
  } else {
    // The first and the last (partial) 16-row tile in full, plus random columns.
    for (int64_t j = 0; j < std::min<int64_t>(16, p.n); ++j) p.cols.push_back(j);
    for (int64_t j = std::max<int64_t>(16, p.n - 17); j < p.n; ++j) p.cols.push_back(j);
    for (int i = 0; i < 64; ++i) p.cols.push_back(testing::uniform_int(rng, 0, p.n - 1));
  }
  const std::vector<float> xf = testing::upcast(p.x, p.in);
  p.dot.assign(static_cast<size_t>(kMaxM) * p.cols.size(), 0.0);
  p.abs_dot.assign(p.dot.size(), 0.0);
  std::vector<float> wrow(static_cast<size_t>(p.k));
  for (size_t c = 0; c < p.cols.size(); ++c) {
    const uint16_t* wb = p.w.data() + p.cols[c] * p.k;
    for (int64_t kk = 0; kk < p.k; ++kk) wrow[kk] = testing::from_half_bits(wb[kk], p.in);
    for (int m = 0; m < kMaxM; ++m) {
      const float* xr = xf.data() + m * p.k;
      double acc = 0.0, abs_acc = 0.0;
      for (int64_t kk = 0; kk < p.k; ++kk) {
        const double v = static_cast<double>(xr[kk]) * wrow[kk];
        acc += v;
        abs_acc += std::abs(v);
      }
      p.dot[m * p.cols.size() + c] = acc;
      p.abs_dot[m * p.cols.size() + c] = abs_acc;
    }
  }
}

// How x, w and y are laid out for one launch.
struct Layout {
  const char* name;
  int64_t x_stride_extra = 0;  // x_stride = k + this (0 => contiguous, passed as 0)
  int64_t y_stride_extra = 0;
  int64_t x_offset = 0, w_offset = 0;  // elements: 1 => not 16-byte aligned
};

std::string case_name(const Problem& p, int64_t m, DType out, bool bias, const Layout& l) {
  return "M=" + std::to_string(m) + " N=" + std::to_string(p.n) + " K=" + std::to_string(p.k) + " " +
         std::string(core::dtype_name(p.in)) + "->" + std::string(core::dtype_name(out)) +
         (bias ? " +bias" : "") + " layout=" + l.name;
}

float read_out(const uint8_t* p, DType t) {
  if (t == DType::kF32) {
    float v;
    std::memcpy(&v, p, 4);
    return v;
  }
  uint16_t b;
  std::memcpy(&b, p, 2);
  return testing::from_half_bits(b, t);
}

class CudaGemvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    LOOM_ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // Every M, output dtype, bias and layout for one problem.
  void run_problem(const Problem& p, std::mt19937_64& rng) {
    const std::vector<Layout> layouts = {
        {"contiguous"},
        {"strided", 8, 3},
        {"x_stride_k+1", 1, 0},
        {"x_misaligned", 0, 0, 1, 0},
        {"w_misaligned", 0, 0, 0, 1},
    };
    const int64_t max_xs = p.k + 8;
    DeviceBuffer dx(static_cast<size_t>((kMaxM * max_xs + 8) * 2));
    DeviceBuffer dw(static_cast<size_t>((p.n * p.k + 8) * 2));
    const int64_t max_ys = p.n + 3;
    DeviceBuffer dy(static_cast<size_t>(kMaxM * max_ys * 4));
    DeviceBuffer db(static_cast<size_t>(p.n * 4));
    int64_t w_offset_loaded = -1;

    for (const Layout& l : layouts) {
      if (l.w_offset != 0 && p.n * p.k > (int64_t{1} << 22)) continue;  // the scalar path is slow
      const int64_t xs = p.k + l.x_stride_extra;
      const int64_t ys = p.n + l.y_stride_extra;
      // x rows at stride xs, from element l.x_offset; padding elements are NaN (must not be read).
      std::vector<uint16_t> xh(static_cast<size_t>(l.x_offset + kMaxM * xs), 0xffff);
      for (int m = 0; m < kMaxM; ++m)
        std::copy(p.x.begin() + m * p.k, p.x.begin() + (m + 1) * p.k, xh.begin() + l.x_offset + m * xs);
      dx.upload(xh);
      if (w_offset_loaded != l.w_offset) {
        LOOM_ASSERT_CUDA(
            cudaMemcpy(dw.as<uint16_t>() + l.w_offset, p.w.data(), p.w.size() * 2, cudaMemcpyHostToDevice));
        w_offset_loaded = l.w_offset;
      }
      for (DType out : {p.in, DType::kF32}) {
        // Bias of y's type: random values, exactly representable.
        const size_t es = core::dtype_size(out);
        std::vector<float> bias_f(static_cast<size_t>(p.n));
        std::vector<uint8_t> bias_bytes(static_cast<size_t>(p.n) * es);
        for (int64_t j = 0; j < p.n; ++j) {
          const float v = testing::uniform(rng, -0.5f, 0.5f);
          if (out == DType::kF32) {
            bias_f[j] = v;
            std::memcpy(bias_bytes.data() + j * 4, &v, 4);
          } else {
            const uint16_t b = testing::to_half_bits(v, out);
            bias_f[j] = testing::from_half_bits(b, out);
            std::memcpy(bias_bytes.data() + j * 2, &b, 2);
          }
        }
        db.upload(bias_bytes);
        for (int64_t m = 1; m <= kMaxM; ++m)
          for (bool bias : {false, true}) {
            SCOPED_TRACE(case_name(p, m, out, bias, l));
            GemmArgs a;
            a.x = dx.as<uint16_t>() + l.x_offset;
            a.w = dw.as<uint16_t>() + l.w_offset;
            a.bias = bias ? db.get() : nullptr;
            a.y = dy.get();
            a.m = m, a.n = p.n, a.k = p.k;
            a.x_stride = l.x_stride_extra == 0 ? 0 : xs;
            a.y_stride = l.y_stride_extra == 0 ? 0 : ys;
            a.in_dtype = p.in, a.out_dtype = out;
            const bool expect_vector = p.k % 8 == 0 && xs % 8 == 0 && l.x_offset == 0 && l.w_offset == 0;
            EXPECT_EQ(gemv_vectorized(a), expect_vector);
            dy.poison();
            LOOM_ASSERT_OK(gemv(a, stream_));
            LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
            check(p, m, out, bias ? &bias_f : nullptr, ys,
                  dy.download<uint8_t>(static_cast<size_t>(kMaxM * ys) * es));
            if (::testing::Test::HasFailure()) return;  // one failing case is enough to read
          }
      }
    }
  }

  void check(const Problem& p, int64_t m, DType out, const std::vector<float>* bias, int64_t ys,
             const std::vector<uint8_t>& raw) {
    const size_t es = core::dtype_size(out);
    // Untouched: rows >= m, and columns n..ys-1 of every row.
    int64_t written_outside = 0;
    for (int64_t i = 0; i < kMaxM; ++i)
      for (int64_t j = 0; j < ys; ++j) {
        if (i < m && j < p.n) continue;
        const uint8_t* q = raw.data() + (i * ys + j) * es;
        for (size_t b = 0; b < es; ++b) written_outside += q[b] != 0xff;
      }
    EXPECT_EQ(written_outside, 0) << "bytes written outside the [m, n] output";
    // Every output written and finite.
    int64_t nonfinite = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < p.n; ++j)
        nonfinite += !std::isfinite(read_out(raw.data() + (i * ys + j) * es, out));
    ASSERT_EQ(nonfinite, 0) << "unwritten or non-finite outputs";

    std::vector<float> got;
    std::vector<double> ref;
    int64_t bad = -1;
    double bad_bound = 0;
    for (int64_t i = 0; i < m; ++i)
      for (size_t c = 0; c < p.cols.size(); ++c) {
        const int64_t j = p.cols[c];
        double r = p.dot[i * p.cols.size() + c];
        if (bias != nullptr) r += (*bias)[j];
        const float g = read_out(raw.data() + (i * ys + j) * es, out);
        const double bound = testing::ulp_rel(out) * std::abs(r) +
                             4 * std::sqrt(static_cast<double>(p.k)) * std::ldexp(1.0, -24) *
                                 p.abs_dot[i * p.cols.size() + c] +
                             1e-7;
        if (bad < 0 && !(std::abs(static_cast<double>(g) - r) <= bound)) {
          bad = static_cast<int64_t>(got.size());
          bad_bound = bound;
        }
        got.push_back(g);
        ref.push_back(r);
      }
    const testing::Diff d = testing::compare(got, ref);
    EXPECT_EQ(d.nan, 0);
    EXPECT_LT(d.rel_l2, out_tolerance(out)) << testing::describe(d);
    EXPECT_LT(bad, 0) << testing::describe(d) << "; first violation: got " << got[std::max<int64_t>(bad, 0)]
                      << " ref " << ref[std::max<int64_t>(bad, 0)] << " bound " << bad_bound;
  }

  void run_grid(DType in) {
    LOOM_CUDA_SEEDED_RNG(rng);
    for (int64_t n : {1, 7, 64, 129, 3584, 4864})
      for (int64_t k : {8, 24, 896, 3584, 18944, 7, 13}) {
        Problem p;
        p.n = n, p.k = k, p.in = in;
        build_problem(p, rng);
        run_problem(p, rng);
        if (::testing::Test::HasFailure()) return;
      }
  }

  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaGemvTest, GridBf16) {
  run_grid(DType::kBF16);
}

TEST_F(CudaGemvTest, GridF16) {
  run_grid(DType::kF16);
}

// Bitwise identical across runs (fixed reduction order, no atomics) and inside a CUDA graph.
TEST_F(CudaGemvTest, DeterministicAndGraphCapturable) {
  LOOM_CUDA_SEEDED_RNG(rng);
  Problem p;
  p.n = 3584, p.k = 3584, p.in = DType::kBF16;
  fill_half(p.x, static_cast<size_t>(kMaxM * p.k), p.in, rng, 1.0f);
  fill_half(p.w, static_cast<size_t>(p.n * p.k), p.in, rng, 1.0f / 64);
  DeviceBuffer dx(p.x.size() * 2), dw(p.w.size() * 2), dy(static_cast<size_t>(kMaxM * p.n * 2));
  dx.upload(p.x);
  dw.upload(p.w);
  GemmArgs a;
  a.x = dx.get(), a.w = dw.get(), a.y = dy.get();
  a.m = 5, a.n = p.n, a.k = p.k;
  ASSERT_TRUE(gemv_vectorized(a));
  LOOM_ASSERT_OK(gemv(a, stream_));
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
  const auto expect = dy.download<uint16_t>(static_cast<size_t>(a.m * p.n));
  dy.poison();
  LOOM_ASSERT_OK(gemv(a, stream_));
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
  EXPECT_EQ(dy.download<uint16_t>(expect.size()), expect);

  dy.poison();
  LOOM_ASSERT_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  const core::Status captured = gemv(a, stream_);
  cudaGraph_t graph = nullptr;
  LOOM_ASSERT_CUDA(cudaStreamEndCapture(stream_, &graph));
  LOOM_ASSERT_OK(captured);
  cudaGraphExec_t exec = nullptr;
  LOOM_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  LOOM_ASSERT_CUDA(cudaGraphLaunch(exec, stream_));
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
  EXPECT_EQ(dy.download<uint16_t>(expect.size()), expect);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST_F(CudaGemvTest, ArgumentErrors) {
  DeviceBuffer b(1 << 16);
  GemmArgs a;
  a.x = a.w = b.get();
  a.y = b.get();
  a.m = 4, a.n = 8, a.k = 8;
  EXPECT_TRUE(gemv_vectorized(a));
  a.m = 9;  // more rows than the kernel handles
  EXPECT_EQ(gemv(a, stream_).code(), core::StatusCode::kInvalidArgument);
  EXPECT_FALSE(gemv_vectorized(a));
  a.m = 4;
  a.in_dtype = DType::kF32;
  EXPECT_EQ(gemv(a, stream_).code(), core::StatusCode::kInvalidArgument);
  EXPECT_FALSE(gemv_vectorized(a));
  a.in_dtype = DType::kBF16;
  a.out_dtype = DType::kF16;
  EXPECT_EQ(gemv(a, stream_).code(), core::StatusCode::kInvalidArgument);
  a.out_dtype = DType::kBF16;
  a.x_stride = 4;  // < k
  EXPECT_EQ(gemv(a, stream_).code(), core::StatusCode::kInvalidArgument);
  a.x_stride = 0;
  a.y = nullptr;
  EXPECT_EQ(gemv(a, stream_).code(), core::StatusCode::kInvalidArgument);
  a.m = 0;  // empty batch: nothing to do
  LOOM_ASSERT_OK(gemv(a, stream_));
  EXPECT_FALSE(gemv_vectorized(a));
}

}  // namespace
}  // namespace loom::backends::cuda
