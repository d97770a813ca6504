// Rotary embeddings: NeoX against the CPU reference op, M-RoPE (chunked and interleaved) against
// a host transcription of transformers' frequency recomposition.
//
// Tolerance: f32 math, one rounding to bf16/f16 per element: within 1 ulp of |ref| plus 1e-5
// absolute (a rotated value near zero is a difference of two O(1) products). Dims beyond
// rotary_dim and elements outside the view must be bit-identical to the input.
#include <cmath>
#include <vector>

#include "backends/cuda/kernels.h"
#include "cuda_test_util.h"
#include "ops/reference_ops.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using core::Tensor;
using testing::DeviceBuffer;
using testing::HalfData;

constexpr int64_t kMaxPos = 4096;

// cos/sin [kMaxPos, half] of the default RoPE with base 1e6 (values only need to be realistic).
struct Tables {
  std::vector<float> cos, sin;
  int32_t rot = 0;
  std::unique_ptr<DeviceBuffer> dcos, dsin;
  RopeTables view() const { return {dcos->as<float>(), dsin->as<float>(), kMaxPos, rot}; }
};

Tables make_tables(int32_t rot) {
  Tables t;
  t.rot = rot;
  const int half = rot / 2;
  t.cos.resize(static_cast<size_t>(kMaxPos * half));
  t.sin.resize(t.cos.size());
  for (int64_t p = 0; p < kMaxPos; ++p)
    for (int i = 0; i < half; ++i) {
      const double inv = 1.0 / std::pow(1e6, 2.0 * i / rot);
      const float ang = static_cast<float>(p) * static_cast<float>(inv);
      t.cos[p * half + i] = std::cos(ang);
      t.sin[p * half + i] = std::sin(ang);
    }
  t.dcos = std::make_unique<DeviceBuffer>(t.cos.size() * 4);
  t.dsin = std::make_unique<DeviceBuffer>(t.sin.size() * 4);
  t.dcos->upload(t.cos);
  t.dsin->upload(t.sin);
  return t;
}

class CudaRopeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    LOOM_ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaRopeTest, NeoxAgainstReferenceOnStridedViews) {
  LOOM_CUDA_SEEDED_RNG(rng);
  auto ref = ops::make_reference_ops();
  for (int64_t d : {64, 128, 80})
    for (int64_t rot : {d, d / 2})
      for (DType dt : {DType::kBF16, DType::kF16}) {
        const Tables tab = make_tables(static_cast<int32_t>(rot));
        const Tensor cos_t = Tensor::borrow(const_cast<float*>(tab.cos.data()), {kMaxPos, rot / 2},
                                            DType::kF32, core::Device::kCpu, nullptr);
        const Tensor sin_t = Tensor::borrow(const_cast<float*>(tab.sin.data()), {kMaxPos, rot / 2},
                                            DType::kF32, core::Device::kCpu, nullptr);
        for (int64_t heads : {1, 4, 7})
          for (int64_t t : {1, 7, 97})
            for (int64_t extra : {0, 2}) {
              SCOPED_TRACE(std::string(core::dtype_name(dt)) + " D=" + std::to_string(d) +
                           " rot=" + std::to_string(rot) + " heads=" + std::to_string(heads) +
                           " T=" + std::to_string(t) + " extra=" + std::to_string(extra));
              const int64_t stride = (heads + extra) * d;
              const size_t n = static_cast<size_t>(t * stride);
              HalfData x = testing::random_half(n, dt, rng);
              std::vector<int32_t> pos(static_cast<size_t>(t));
              for (int32_t& p : pos) p = static_cast<int32_t>(testing::uniform_int(rng, 0, kMaxPos - 1));
              DeviceBuffer dx(n * 2), dp(pos.size() * 4);
              dx.upload(x.bits);
              dp.upload(pos);
              HeadView v{dx.get(), t, heads, d, extra == 0 ? 0 : stride, dt};
              LOOM_ASSERT_OK(rope_neox(v, dp.as<int32_t>(), tab.view(), stream_));
              LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
              const std::vector<uint16_t> out = dx.download<uint16_t>(n);

              Tensor xr = Tensor::empty({t, heads, d}, DType::kF32);
              std::vector<float> got;
              for (int64_t i = 0; i < t; ++i)
                for (int64_t j = 0; j < heads * d; ++j) {
                  xr.data_as<float>()[i * heads * d + j] = x.f32[i * stride + j];
                  got.push_back(testing::from_half_bits(out[i * stride + j], dt));
                }
              ops::RopeParams rp;
              rp.rotary_dim = static_cast<int32_t>(rot);
              ref->rope(xr, pos, cos_t, sin_t, rp);
              EXPECT_TRUE(
                  testing::close_to(got, testing::to_double(xr.data_as<float>(), got.size()), dt, 1.0, 1e-5));
              for (int64_t i = 0; i < t; ++i) {
                for (int64_t h = 0; h < heads; ++h)
                  for (int64_t j = rot; j < d; ++j)
                    ASSERT_EQ(out[i * stride + h * d + j], x.bits[i * stride + h * d + j])
                        << "pass-through dim";
                for (int64_t j = heads * d; j < stride; ++j)
                  ASSERT_EQ(out[i * stride + j], x.bits[i * stride + j]) << "outside the view";
              }
            }
      }
}

TEST_F(CudaRopeTest, OutOfRangePositionsGiveNaN) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const Tables tab = make_tables(64);
  HalfData x = testing::random_half(3 * 2 * 64, DType::kBF16, rng);
  std::vector<int32_t> pos = {5, static_cast<int32_t>(kMaxPos), -1};
  DeviceBuffer dx(x.bits.size() * 2), dp(12);
  dx.upload(x.bits);
  dp.upload(pos);
  LOOM_ASSERT_OK(
      rope_neox(HeadView{dx.get(), 3, 2, 64, 0, DType::kBF16}, dp.as<int32_t>(), tab.view(), stream_));
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
  const std::vector<float> out = testing::upcast(dx.download<uint16_t>(x.bits.size()), DType::kBF16);
  for (int i = 0; i < 128; ++i) EXPECT_FALSE(std::isnan(out[i])) << i;
  for (int i = 128; i < 384; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
}

// Which position row (0 t, 1 h, 2 w) feeds frequency i, transcribed from transformers:
//   Qwen2.5-VL: torch.cat([m[i % 3] for i, m in enumerate(freq.split(mrope_section, dim=-1))])
//   Qwen3-VL:   freqs_t = freq[0]; for dim, offset in ((1, 1), (2, 2)):
//                 freqs_t[..., offset : mrope_section[dim] * 3 : 3] = freq[dim, ..., same slice]
std::vector<int> transformers_rows(const MropeSection& s, int half) {
  std::vector<int> row(static_cast<size_t>(half), 0);
  if (!s.interleaved) {
    const int sections[3] = {s.t, s.h, s.w};
    int begin = 0;
    for (int chunk = 0; chunk < 3; ++chunk) {
      for (int i = begin; i < begin + sections[chunk]; ++i) row[i] = chunk % 3;
      begin += sections[chunk];
    }
  } else {
    const int sections[3] = {s.t, s.h, s.w};
    for (int dim = 1; dim <= 2; ++dim)
      for (int i = dim; i < std::min(half, sections[dim] * 3); i += 3) row[i] = dim;
  }
  return row;
}

TEST_F(CudaRopeTest, MropeChunkedAndInterleaved) {
  LOOM_CUDA_SEEDED_RNG(rng);
  struct Cfg {
    int64_t d;
    MropeSection s;
  };
  const Cfg cfgs[] = {
      {128, {16, 24, 24, false}},  // Qwen2-VL / Qwen2.5-VL / Qwen2.5-Omni
      {128, {24, 20, 20, true}},   // Qwen3-VL
      {64, {8, 12, 12, false}},
      {64, {12, 10, 10, true}},
  };
  for (const Cfg& c : cfgs)
    for (DType dt : {DType::kBF16, DType::kF16})
      for (int64_t t : {1, 7, 97}) {
        SCOPED_TRACE("D=" + std::to_string(c.d) + (c.s.interleaved ? " interleaved" : " chunked") +
                     " T=" + std::to_string(t) + " " + std::string(core::dtype_name(dt)));
        const int64_t heads = 5, half = c.d / 2;
        const Tables tab = make_tables(static_cast<int32_t>(c.d));
        const int64_t pos_stride = t + 3;
        std::vector<int32_t> pos(static_cast<size_t>(3 * pos_stride), -7);  // padding columns never read
        for (int r = 0; r < 3; ++r)
          for (int64_t i = 0; i < t; ++i)
            pos[r * pos_stride + i] = static_cast<int32_t>(testing::uniform_int(rng, 0, kMaxPos - 1));
        const size_t n = static_cast<size_t>(t * heads * c.d);
        HalfData x = testing::random_half(n, dt, rng);
        DeviceBuffer dx(n * 2), dp(pos.size() * 4);
        dx.upload(x.bits);
        dp.upload(pos);
        LOOM_ASSERT_OK(rope_mrope(HeadView{dx.get(), t, heads, c.d, 0, dt}, dp.as<int32_t>(), pos_stride,
                                  tab.view(), c.s, stream_));
        LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
        const std::vector<float> got = testing::upcast(dx.download<uint16_t>(n), dt);
        const std::vector<int> rows = transformers_rows(c.s, static_cast<int>(half));
        std::vector<double> ref(n);
        for (int64_t i = 0; i < t; ++i)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t f = 0; f < half; ++f) {
              const int64_t p = pos[rows[f] * pos_stride + i];
              const double cs = tab.cos[p * half + f], sn = tab.sin[p * half + f];
              const int64_t base = (i * heads + h) * c.d;
              const double a = x.f32[base + f], b = x.f32[base + f + half];
              ref[base + f] = a * cs - b * sn;
              ref[base + f + half] = b * cs + a * sn;
            }
        EXPECT_TRUE(testing::close_to(got, ref, dt, 1.0, 1e-5));
      }
}

// With the same position in all three rows (text tokens), M-RoPE is plain RoPE, bit for bit.
TEST_F(CudaRopeTest, MropeOfTextTokensEqualsNeox) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const int64_t t = 33, heads = 4, d = 128;
  const Tables tab = make_tables(128);
  std::vector<int32_t> p1(static_cast<size_t>(t)), p3;
  for (int32_t& p : p1) p = static_cast<int32_t>(testing::uniform_int(rng, 0, kMaxPos - 1));
  for (int r = 0; r < 3; ++r) p3.insert(p3.end(), p1.begin(), p1.end());
  HalfData x = testing::random_half(static_cast<size_t>(t * heads * d), DType::kBF16, rng);
  for (bool interleaved : {false, true}) {
    DeviceBuffer a(x.bits.size() * 2), b(x.bits.size() * 2), dp1(p1.size() * 4), dp3(p3.size() * 4);
    a.upload(x.bits);
    b.upload(x.bits);
    dp1.upload(p1);
    dp3.upload(p3);
    LOOM_ASSERT_OK(
        rope_neox(HeadView{a.get(), t, heads, d, 0, DType::kBF16}, dp1.as<int32_t>(), tab.view(), stream_));
    const MropeSection s = interleaved ? MropeSection{24, 20, 20, true} : MropeSection{16, 24, 24, false};
    LOOM_ASSERT_OK(rope_mrope(HeadView{b.get(), t, heads, d, 0, DType::kBF16}, dp3.as<int32_t>(), t,
                              tab.view(), s, stream_));
    LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
    EXPECT_EQ(a.download<uint16_t>(x.bits.size()), b.download<uint16_t>(x.bits.size()));
  }
}

TEST_F(CudaRopeTest, ArgumentErrors) {
  const Tables tab = make_tables(64);
  DeviceBuffer b(1 << 16);
  HeadView v{b.get(), 4, 2, 64, 0, DType::kBF16};
  RopeTables bad = tab.view();
  bad.rotary_dim = 66;  // > head_dim
  EXPECT_EQ(rope_neox(v, b.as<int32_t>(), bad, stream_).code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(rope_mrope(v, b.as<int32_t>(), 4, tab.view(), MropeSection{10, 10, 10, false}, stream_).code(),
            core::StatusCode::kInvalidArgument);  // sections sum to 30, not 32
  EXPECT_EQ(rope_mrope(v, b.as<int32_t>(), 3, tab.view(), MropeSection{8, 12, 12, false}, stream_).code(),
            core::StatusCode::kInvalidArgument);  // pos_stride < tokens
  v.dtype = DType::kF32;
  EXPECT_EQ(rope_neox(v, b.as<int32_t>(), tab.view(), stream_).code(), core::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom::backends::cuda
