// The vision-tower ops on the CUDA backend against the CPU reference (ops/reference_ops.h, double
// accumulation on the same bf16/f16/f32-rounded inputs): LayerNorm (with and without bias, in
// place), exact and tanh GELU, and `embedding` used as the row gather of activations (CudaOps).
//
// Tolerances: the GPU computes in f32 and rounds each output once to its storage type, so bf16/f16
// outputs must be within 1 ulp of the storage type (relative to |ref|) plus 1e-6 absolute (results
// near zero; GELU's 1 + erf(x) cancels for negative x, costing ~|x| * 2^-24 absolute). f32 outputs:
// 64 f32 ulps (7.6e-6 relative) plus 1e-5 absolute, which covers the f32 mean/variance sums over
// rows of up to 1280 values offset by up to 20 (error ~1e-6 after normalisation) and CUDA's erff /
// tanhf (<= 2 ulp). Gathers are bit-exact. Outputs are poisoned (NaN) before each call.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_ops.h"
#include "backends/cuda/kernels.h"
#include "cuda_test_util.h"
#include "ops/reference_ops.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using core::Tensor;
using testing::DeviceBuffer;

Tensor host_f32(const std::vector<float>& v, core::Shape shape) {
  Tensor t = Tensor::empty(std::move(shape), DType::kF32);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  std::memcpy(t.data(), v.data(), v.size() * sizeof(float));
  return t;
}

std::vector<double> as_double(const Tensor& t) {
  return testing::to_double(t.data_as<float>(), static_cast<size_t>(t.numel()));
}

// Values in any of f32/bf16/f16: storage bytes and their exact f32 values.
struct Data {
  DType dtype = DType::kF32;
  std::vector<uint8_t> bytes;
  std::vector<float> f32;
};

Data make_data(std::vector<float> values, DType t) {
  Data d;
  d.dtype = t;
  const size_t es = core::dtype_size(t);
  d.bytes.resize(values.size() * es);
  for (size_t i = 0; i < values.size(); ++i) {
    if (t == DType::kF32) {
      std::memcpy(d.bytes.data() + 4 * i, &values[i], 4);
    } else {
      const uint16_t b = testing::to_half_bits(values[i], t);
      std::memcpy(d.bytes.data() + 2 * i, &b, 2);
      values[i] = testing::from_half_bits(b, t);
    }
  }
  d.f32 = std::move(values);
  return d;
}

Data random_data(size_t n, DType t, std::mt19937_64& rng, float lo, float hi) {
  std::vector<float> v(n);
  for (float& x : v) x = testing::uniform(rng, lo, hi);
  return make_data(std::move(v), t);
}

std::vector<float> download_f32(const DeviceBuffer& b, size_t n, DType t) {
  if (t == DType::kF32) return b.download<float>(n);
  return testing::upcast(b.download<uint16_t>(n), t);
}

// (ulps, abs floor) of the comparison bound for outputs stored as t (see the header comment).
std::pair<double, double> bound(DType t) {
  return t == DType::kF32 ? std::pair{64.0, 1e-5} : std::pair{1.0, 1e-6};
}

class CudaVisionOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    LOOM_ASSERT_CUDA(cudaStreamCreate(&stream_));
    ref_ = ops::make_reference_ops();
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  void sync() { ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess); }

  cudaStream_t stream_ = nullptr;
  std::unique_ptr<ops::Ops> ref_;
};

TEST_F(CudaVisionOpsTest, LayerNormGrid) {
  LOOM_CUDA_SEEDED_RNG(rng);
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (DType wdt : {DType::kF32, DType::kBF16})
      for (int64_t h : {1, 7, 64, 80, 1000, 1280})
        for (int64_t t : {1, 5, 130})
          for (bool with_bias : {false, true}) {
            SCOPED_TRACE(std::string(core::dtype_name(dt)) + " weight " + std::string(core::dtype_name(wdt)) +
                         " T=" + std::to_string(t) + " H=" + std::to_string(h) + (with_bias ? " bias" : ""));
            const float eps = testing::uniform(rng, 1e-6f, 1e-5f);
            std::vector<float> xv(static_cast<size_t>(t * h));
            for (int64_t r = 0; r < t; ++r) {
              const float off = testing::uniform(rng, -20.0f, 20.0f);  // the mean subtraction matters
              for (int64_t i = 0; i < h; ++i) xv[r * h + i] = off + testing::uniform(rng, -3.0f, 3.0f);
            }
            const Data x = make_data(std::move(xv), dt);
            const Data w = random_data(static_cast<size_t>(h), wdt, rng, -2.0f, 2.0f);
            const Data b = random_data(static_cast<size_t>(h), wdt, rng, -1.0f, 1.0f);
            DeviceBuffer dx(x.bytes.size()), dy(x.bytes.size()), dw(w.bytes.size()), db(b.bytes.size());
            dx.upload(x.bytes);
            dw.upload(w.bytes);
            db.upload(b.bytes);
            dy.poison();
            const NormWeight bias = with_bias ? NormWeight{db.get(), wdt} : NormWeight{nullptr, DType::kF32};
            LOOM_ASSERT_OK(layer_norm(dx.get(), {dw.get(), wdt}, bias, eps, dy.get(), t, h, dt, stream_));
            sync();
            Tensor yr = Tensor::empty({t, h}, DType::kF32);
            ref_->layer_norm(host_f32(x.f32, {t, h}), host_f32(w.f32, {h}),
                             with_bias ? host_f32(b.f32, {h}) : Tensor(), eps, yr);
            const auto [ulps, floor] = bound(dt);
            EXPECT_TRUE(
                testing::close_to(download_f32(dy, x.f32.size(), dt), as_double(yr), dt, ulps, floor));
            // In place (y aliases x).
            LOOM_ASSERT_OK(layer_norm(dx.get(), {dw.get(), wdt}, bias, eps, dx.get(), t, h, dt, stream_));
            sync();
            EXPECT_TRUE(testing::close_to(download_f32(dx, x.f32.size(), dt), as_double(yr), dt, ulps, floor))
                << "in place";
          }
}

TEST_F(CudaVisionOpsTest, LayerNormRejectsBadArguments) {
  DeviceBuffer b(1024);
  const NormWeight w{b.get(), DType::kF32};
  EXPECT_EQ(layer_norm(b.get(), w, {}, 1e-6f, b.get(), 1, 0, DType::kBF16, stream_).code(),
            core::StatusCode::kInvalidArgument);
  EXPECT_EQ(layer_norm(b.get(), w, {}, 1e-6f, b.get(), 1, 8, DType::kI32, stream_).code(),
            core::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      layer_norm(b.get(), w, {b.get(), DType::kI32}, 1e-6f, b.get(), 1, 8, DType::kBF16, stream_).code(),
      core::StatusCode::kInvalidArgument);
}

TEST_F(CudaVisionOpsTest, GeluExactAndTanhGrid) {
  LOOM_CUDA_SEEDED_RNG(rng);
  for (DType dt : {DType::kBF16, DType::kF16, DType::kF32})
    for (int64_t n : {1, 7, 1000, 100003})
      for (bool tanh_approx : {false, true})
        for (bool in_place : {false, true}) {
          SCOPED_TRACE(std::string(core::dtype_name(dt)) + " n=" + std::to_string(n) +
                       (tanh_approx ? " tanh" : " erf") + (in_place ? " in place" : ""));
          const Data x = random_data(static_cast<size_t>(n), dt, rng, -8.0f, 8.0f);
          DeviceBuffer dx(x.bytes.size()), dy(x.bytes.size());
          dx.upload(x.bytes);
          dy.poison();
          DeviceBuffer& out = in_place ? dx : dy;
          LOOM_ASSERT_OK(gelu(dx.get(), out.get(), n, tanh_approx, dt, stream_));
          sync();
          Tensor yr = Tensor::empty({n}, DType::kF32);
          ref_->gelu(host_f32(x.f32, {n}), yr, tanh_approx);
          const auto [ulps, floor] = bound(dt);
          EXPECT_TRUE(testing::close_to(download_f32(out, x.f32.size(), dt), as_double(yr), dt, ulps, floor));
        }
  // A misaligned (odd element offset) buffer takes the scalar path and computes the same.
  const Data x = random_data(33, DType::kBF16, rng, -4.0f, 4.0f);
  DeviceBuffer dx(x.bytes.size() + 2), dy(x.bytes.size() + 2);
  ASSERT_EQ(
      cudaMemcpy(static_cast<char*>(dx.get()) + 2, x.bytes.data(), x.bytes.size(), cudaMemcpyHostToDevice),
      cudaSuccess);
  dy.poison();
  LOOM_ASSERT_OK(gelu(static_cast<char*>(dx.get()) + 2, static_cast<char*>(dy.get()) + 2, 33, false,
                      DType::kBF16, stream_));
  sync();
  std::vector<uint16_t> bits(34);
  ASSERT_EQ(cudaMemcpy(bits.data(), dy.get(), 68, cudaMemcpyDeviceToHost), cudaSuccess);
  bits.erase(bits.begin());
  Tensor yr = Tensor::empty({33}, DType::kF32);
  ref_->gelu(host_f32(x.f32, {33}), yr, false);
  EXPECT_TRUE(testing::close_to(testing::upcast(bits, DType::kBF16), as_double(yr), DType::kBF16, 1.0, 1e-6));
}

// Through CudaOps: layer_norm / gelu on activations from empty(), and embedding as the row gather
// of an activation tensor (the vision tower's window permutation), bit-exact.
TEST_F(CudaVisionOpsTest, CudaOpsVisionOps) {
  LOOM_CUDA_SEEDED_RNG(rng);
  auto made = make_cuda_ops(0.05);
  ASSERT_TRUE(made.ok()) << made.status().to_string();
  ops::Ops& ops = **made;
  const DType dt = ops.activation_dtype();
  const int64_t rows = 37, h = 80;
  const Data x = random_data(static_cast<size_t>(rows * h), dt, rng, -3.0f, 3.0f);
  Tensor hx = Tensor::empty({rows, h}, dt);
  std::memcpy(hx.data(), x.bytes.data(), x.bytes.size());
  std::vector<int32_t> ids(50);
  for (auto& r : ids) r = static_cast<int32_t>(testing::uniform_int(rng, 0, rows - 1));
  ops.prepare_indices({ids});
  const Tensor dx = ops.upload(hx);
  Tensor g = ops.empty({50, h}, dt);
  ops.embedding(dx, ids, g);
  const Tensor hg = ops.to_host(g);
  for (int64_t i = 0; i < 50; ++i)
    ASSERT_EQ(std::memcmp(static_cast<const char*>(hg.data()) + i * h * 2,
                          static_cast<const char*>(hx.data()) + int64_t{ids[i]} * h * 2, h * 2),
              0)
        << "row " << i;

  const Data w = random_data(static_cast<size_t>(h), DType::kF32, rng, -2.0f, 2.0f);
  const Data b = random_data(static_cast<size_t>(h), DType::kF32, rng, -1.0f, 1.0f);
  const Tensor wt = ops.upload(host_f32(w.f32, {h})), bt = ops.upload(host_f32(b.f32, {h}));
  Tensor y = ops.empty({rows, h}, dt);
  ops.layer_norm(dx, wt, bt, 1e-6f, y);
  Tensor yr = Tensor::empty({rows, h}, DType::kF32);
  ref_->layer_norm(host_f32(x.f32, {rows, h}), host_f32(w.f32, {h}), host_f32(b.f32, {h}), 1e-6f, yr);
  const Tensor y_host = ops.to_host(y).to_f32();  // the device's rounded layer_norm output
  const std::vector<float> got(y_host.data_as<float>(), y_host.data_as<float>() + rows * h);
  EXPECT_TRUE(testing::close_to(got, as_double(yr), dt, 1.0, 1e-6));

  ops.gelu(y, y, true);  // in place
  Tensor gr = Tensor::empty({rows, h}, DType::kF32);
  ref_->gelu(y_host, gr, true);
  const Tensor gelu_host = ops.to_host(y).to_f32();
  EXPECT_TRUE(
      testing::close_to(std::vector<float>(gelu_host.data_as<float>(), gelu_host.data_as<float>() + rows * h),
                        as_double(gr), dt, 1.0, 1e-6));
}

}  // namespace
}  // namespace loom::backends::cuda
