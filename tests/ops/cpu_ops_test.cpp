// The fast CPU backend against the reference: linear and the elementwise ops over grids
// of odd sizes, every supported ISA, 1 and 3 threads. Fresh random inputs each run
// (seed printed on failure); outputs poisoned with NaN before each call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "cpu_test_variants.h"
#include "op_test_util.h"

namespace loom::ops {
namespace {

using core::DType;

using testing::all_close;
using testing::bit_equal;
using testing::clone;
using testing::fast_variants;
using testing::poison;
using testing::random_tensor;
using testing::reference;
using testing::uniform;
using testing::uniform_int;

constexpr DType kWeightTypes[] = {DType::kF32, DType::kBF16, DType::kF16};

std::string case_name(std::initializer_list<std::pair<const char*, int64_t>> kv) {
  std::string s;
  for (const auto& [k, v] : kv) s += std::string(s.empty() ? "" : " ") + k + "=" + std::to_string(v);
  return s;
}

// Linear tolerance: both sides see identical (upcast) inputs; the fast path sums K
// products in f32 (blocked / vector lanes), the reference in double. With inputs in
// [-1, 1] the f32 sum's rounding error grows ~ sqrt(K) * 2^-24 * sum|x w|; measured
// worst over many runs is ~3e-7 * sqrt(K) (absolute); the bound has ~10x margin.
double linear_atol(int64_t k) {
  return 4e-6 * std::sqrt(static_cast<double>(k));
}
constexpr double kLinearRtol = 1e-5;

TEST(CpuOpsLinear, MatchesReferenceOverGrid) {
  LOOM_SEEDED_RNG(rng);
  const int64_t ms[] = {1, 2, 3, 5, 17, 64, 65, 130};  // 64/65: GEMV / sgemm boundary
  const std::pair<int64_t, int64_t> kns[] = {{64, 96}, {96, 64}, {200, 1000}, {1000, 200}, {77, 131}};
  for (int64_t m : ms)
    for (auto [k, n] : kns)
      for (DType wt : kWeightTypes)
        for (bool with_bias : {false, true}) {
          const Tensor x = random_tensor({m, k}, DType::kF32, rng);
          const Tensor w = random_tensor({n, k}, wt, rng);
          const Tensor bias = with_bias ? random_tensor({n}, wt, rng) : Tensor();
          Tensor ref = Tensor::empty({m, n}, DType::kF32);
          poison(ref);
          reference().linear(x, w, bias, ref);
          for (auto& v : fast_variants()) {
            Tensor y = Tensor::empty({m, n}, DType::kF32);
            poison(y);
            v.ops->linear(x, w, bias, y);
            EXPECT_TRUE(all_close(y, ref, linear_atol(k), kLinearRtol))
                << v.name << " " << case_name({{"M", m}, {"K", k}, {"N", n}, {"bias", with_bias}}) << " w "
                << core::dtype_name(wt);
          }
        }
}

// 16-bit weights on the sgemm path are converted one tile of ~2M elements at a time;
// N * K above that makes the call span several tiles (the last one partial).
TEST(CpuOpsLinear, SgemmPathSpansSeveralWeightTiles) {
  LOOM_SEEDED_RNG(rng);
  const int64_t m = 65, k = 1000, n = 2200;
  for (DType wt : {DType::kBF16, DType::kF16}) {
    const Tensor x = random_tensor({m, k}, DType::kF32, rng);
    const Tensor w = random_tensor({n, k}, wt, rng);
    const Tensor bias = random_tensor({n}, DType::kF32, rng);
    Tensor ref = Tensor::empty({m, n}, DType::kF32);
    reference().linear(x, w, bias, ref);
    for (auto& v : fast_variants()) {
      Tensor y = Tensor::empty({m, n}, DType::kF32);
      poison(y);
      v.ops->linear(x, w, bias, y);
      EXPECT_TRUE(all_close(y, ref, linear_atol(k), kLinearRtol)) << v.name << " " << core::dtype_name(wt);
    }
  }
}

// rms_norm: f32 sum of squares in vector lanes vs double; relative error ~1e-7.
constexpr double kNormAtol = 1e-6, kNormRtol = 1e-5;

TEST(CpuOpsNorm, RmsNormAndAddRmsNormMatchReference) {
  LOOM_SEEDED_RNG(rng);
  const int64_t hiddens[] = {1, 7, 64, 80, 896, 1000, 3584};
  const int64_t rows_list[] = {1, 5, 130};
  for (int64_t h : hiddens)
    for (int64_t rows : rows_list)
      for (DType wt : kWeightTypes) {
        const std::string what =
            case_name({{"H", h}, {"rows", rows}}) + " w " + std::string(core::dtype_name(wt));
        const float eps = uniform(rng, 1e-6f, 1e-5f);
        const Tensor x = random_tensor({rows, h}, DType::kF32, rng, -3.0f, 3.0f);
        const Tensor w = random_tensor({h}, wt, rng, -2.0f, 2.0f);
        Tensor ref = Tensor::empty({rows, h}, DType::kF32);
        poison(ref);
        reference().rms_norm(x, w, eps, ref);
        // add_rms_norm inputs and reference
        const Tensor res0 = random_tensor({rows, h}, DType::kF32, rng, -3.0f, 3.0f);
        const Tensor add = random_tensor({rows, h}, DType::kF32, rng, -3.0f, 3.0f);
        Tensor ref_res = clone(res0), ref_y = Tensor::empty({rows, h}, DType::kF32);
        poison(ref_y);
        reference().add_rms_norm(ref_res, add, w, eps, ref_y);
        for (auto& v : fast_variants()) {
          Tensor y = Tensor::empty({rows, h}, DType::kF32);
          poison(y);
          v.ops->rms_norm(x, w, eps, y);
          EXPECT_TRUE(all_close(y, ref, kNormAtol, kNormRtol)) << v.name << " rms_norm " << what;
          Tensor inplace = clone(x);  // y aliases x
          v.ops->rms_norm(inplace, w, eps, inplace);
          EXPECT_TRUE(all_close(inplace, ref, kNormAtol, kNormRtol))
              << v.name << " rms_norm in place " << what;
          Tensor res = clone(res0);
          Tensor y2 = Tensor::empty({rows, h}, DType::kF32);
          poison(y2);
          v.ops->add_rms_norm(res, add, w, eps, y2);
          EXPECT_TRUE(bit_equal(res, ref_res)) << v.name << " add_rms_norm residual " << what;
          EXPECT_TRUE(all_close(y2, ref_y, kNormAtol, kNormRtol)) << v.name << " add_rms_norm y " << what;
          Tensor res3 = clone(res0), x3 = clone(add);  // y aliases x
          v.ops->add_rms_norm(res3, x3, w, eps, x3);
          EXPECT_TRUE(all_close(x3, ref_y, kNormAtol, kNormRtol)) << v.name << " add_rms_norm y=x " << what;
        }
      }
}

// rope: two f32 products and a sum per element (the reference rounds once from double):
// <= ~2 ulp of the operands' magnitude (|x| <= 2 here).
constexpr double kRopeAtol = 1e-6, kRopeRtol = 1e-6;

TEST(CpuOpsRope, MatchesReference) {
  LOOM_SEEDED_RNG(rng);
  const int64_t max_pos = 4096;
  for (int64_t head_dim : {64, 80, 128})
    for (int64_t rot : {head_dim, head_dim / 2})
      for (int64_t heads : {1, 7, 14})
        for (int64_t tokens : {1, 7, 97}) {
          const int64_t half = rot / 2;
          Tensor cos = Tensor::empty({max_pos, half}, DType::kF32),
                 sin = Tensor::empty({max_pos, half}, DType::kF32);
          for (int64_t p = 0; p < max_pos; ++p)
            for (int64_t i = 0; i < half; ++i) {
              const double angle = p * std::pow(1e6, -2.0 * i / rot);
              cos.data_as<float>()[p * half + i] = static_cast<float>(std::cos(angle));
              sin.data_as<float>()[p * half + i] = static_cast<float>(std::sin(angle));
            }
          std::vector<int32_t> pos(static_cast<size_t>(tokens));
          for (auto& p : pos) p = static_cast<int32_t>(uniform_int(rng, 0, max_pos - 1));
          const Tensor x = random_tensor({tokens, heads, head_dim}, DType::kF32, rng, -2.0f, 2.0f);
          Tensor ref = clone(x);
          reference().rope(ref, pos, cos, sin, RopeParams{static_cast<int32_t>(rot)});
          for (auto& v : fast_variants()) {
            Tensor y = clone(x);
            v.ops->rope(y, pos, cos, sin, RopeParams{static_cast<int32_t>(rot)});
            EXPECT_TRUE(all_close(y, ref, kRopeAtol, kRopeRtol))
                << v.name << " "
                << case_name({{"D", head_dim}, {"rot", rot}, {"heads", heads}, {"T", tokens}});
          }
        }
}

// silu_mul: vector exp (~2 ulp) and a division: relative ~1e-6 of |silu(g) * u|.
constexpr double kSiluAtol = 1e-6, kSiluRtol = 4e-6;

TEST(CpuOpsSiluMul, MatchesReference) {
  LOOM_SEEDED_RNG(rng);
  for (int64_t inter : {1, 7, 64, 100, 4864})
    for (int64_t tokens : {1, 3, 130}) {
      // gate over [-30, 30] reaches both saturated ends of silu.
      Tensor gu = random_tensor({tokens, 2 * inter}, DType::kF32, rng, -30.0f, 30.0f);
      Tensor ref = Tensor::empty({tokens, inter}, DType::kF32);
      poison(ref);
      reference().silu_mul(gu, ref);
      for (auto& v : fast_variants()) {
        Tensor y = Tensor::empty({tokens, inter}, DType::kF32);
        poison(y);
        v.ops->silu_mul(gu, y);
        EXPECT_TRUE(all_close(y, ref, kSiluAtol, kSiluRtol))
            << v.name << " " << case_name({{"I", inter}, {"T", tokens}});
      }
    }
}

TEST(CpuOpsEmbedding, GathersExactly) {
  LOOM_SEEDED_RNG(rng);
  const int64_t vocab = 1000;
  for (int64_t hidden : {7, 64, 896, 1000})
    for (DType t : kWeightTypes)
      for (int64_t tokens : {1, 97, 300}) {
        const Tensor table = random_tensor({vocab, hidden}, t, rng);
        std::vector<int32_t> ids(static_cast<size_t>(tokens));
        for (auto& id : ids) id = static_cast<int32_t>(uniform_int(rng, 0, vocab - 1));
        ids.front() = 0;
        ids.back() = static_cast<int32_t>(vocab - 1);
        Tensor ref = Tensor::empty({tokens, hidden}, DType::kF32);
        poison(ref);
        reference().embedding(table, ids, ref);
        for (auto& v : fast_variants()) {
          Tensor y = Tensor::empty({tokens, hidden}, DType::kF32);
          poison(y);
          v.ops->embedding(table, ids, y);
          EXPECT_TRUE(bit_equal(y, ref))
              << v.name << " " << case_name({{"H", hidden}, {"T", tokens}}) << " " << core::dtype_name(t);
        }
      }
}

TEST(CpuOpsAddInplace, IsExactF32Add) {
  LOOM_SEEDED_RNG(rng);
  for (int64_t n : {1, 7, 1000, 100003}) {
    const Tensor a0 = random_tensor({n}, DType::kF32, rng), b = random_tensor({n}, DType::kF32, rng);
    Tensor ref = clone(a0);
    reference().add_inplace(ref, b);
    for (auto& v : fast_variants()) {
      Tensor a = clone(a0);
      v.ops->add_inplace(a, b);
      EXPECT_TRUE(bit_equal(a, ref)) << v.name << " n=" << n;
    }
  }
}

TEST(CpuOpsWriteKv, ScattersToShuffledSlotsExactly) {
  LOOM_SEEDED_RNG(rng);
  for (DType ct : kWeightTypes)
    for (int64_t block_size : {1, 16})
      for (int64_t head_dim : {64, 80, 128})
        for (int64_t tokens : {1, 7, 97}) {
          const int64_t kv_heads = 2;
          const int64_t num_blocks = (tokens + block_size - 1) / block_size * 2 + 3;
          std::vector<int32_t> slots(static_cast<size_t>(num_blocks * block_size));
          std::iota(slots.begin(), slots.end(), 0);
          std::shuffle(slots.begin(), slots.end(), rng);
          slots.resize(static_cast<size_t>(tokens));  // distinct, non-contiguous slots
          const Tensor k = random_tensor({tokens, kv_heads, head_dim}, DType::kF32, rng);
          const Tensor v = random_tensor({tokens, kv_heads, head_dim}, DType::kF32, rng);
          const Tensor kc0 = random_tensor({num_blocks, block_size, kv_heads, head_dim}, ct, rng);
          const Tensor vc0 = random_tensor({num_blocks, block_size, kv_heads, head_dim}, ct, rng);
          Tensor kref = clone(kc0), vref = clone(vc0);
          reference().write_kv(k, v, slots, kref, vref);
          for (auto& var : fast_variants()) {
            Tensor kc = clone(kc0), vc = clone(vc0);
            var.ops->write_kv(k, v, slots, kc, vc);
            const std::string what = case_name({{"bs", block_size}, {"D", head_dim}, {"T", tokens}}) + " " +
                                     std::string(core::dtype_name(ct));
            EXPECT_TRUE(bit_equal(kc, kref)) << var.name << " k " << what;
            EXPECT_TRUE(bit_equal(vc, vref)) << var.name << " v " << what;
          }
        }
}

// layer_norm: the fast path sums mean and variance in double and normalises in double, then
// applies weight and bias in f32 (a few f32 roundings of values up to ~|w| * 3 + |b|). Rows are
// offset by up to +-20 so that the mean subtraction matters (an f32 sum would lose ~1e-5 there).
// Measured worst 0.012 of this bound.
constexpr double kLayerNormAtol = 1e-5, kLayerNormRtol = 1e-5;

TEST(CpuOpsLayerNorm, MatchesReference) {
  LOOM_SEEDED_RNG(rng);
  for (int64_t h : {1, 7, 64, 80, 1000, 1280})
    for (int64_t rows : {1, 5, 130})
      for (DType wt : kWeightTypes)
        for (bool with_bias : {false, true}) {
          const std::string what = case_name({{"H", h}, {"rows", rows}, {"bias", with_bias}}) + " w " +
                                   std::string(core::dtype_name(wt));
          const float eps = uniform(rng, 1e-6f, 1e-5f);
          Tensor x = random_tensor({rows, h}, DType::kF32, rng, -3.0f, 3.0f);
          for (int64_t r = 0; r < rows; ++r) {
            const float off = uniform(rng, -20.0f, 20.0f);
            for (int64_t i = 0; i < h; ++i) x.data_as<float>()[r * h + i] += off;
          }
          const Tensor w = random_tensor({h}, wt, rng, -2.0f, 2.0f);
          const Tensor b = with_bias ? random_tensor({h}, wt, rng, -1.0f, 1.0f) : Tensor();
          Tensor ref = Tensor::empty({rows, h}, DType::kF32);
          poison(ref);
          reference().layer_norm(x, w, b, eps, ref);
          for (auto& v : fast_variants()) {
            Tensor y = Tensor::empty({rows, h}, DType::kF32);
            poison(y);
            v.ops->layer_norm(x, w, b, eps, y);
            EXPECT_TRUE(all_close(y, ref, kLayerNormAtol, kLayerNormRtol)) << v.name << " " << what;
            Tensor inplace = clone(x);  // y aliases x
            v.ops->layer_norm(inplace, w, b, eps, inplace);
            EXPECT_TRUE(all_close(inplace, ref, kLayerNormAtol, kLayerNormRtol))
                << v.name << " in place " << what;
          }
        }
}

// gelu: f32 erf / tanh (~1-2 ulp) and two products; for negative x, 1 + erf(.) cancels, which
// costs up to ~|x| * 2^-24 absolute (|x| <= 8 here: < 5e-7). Measured worst 0.08 of this bound.
constexpr double kGeluAtol = 1e-6, kGeluRtol = 4e-6;

TEST(CpuOpsGelu, ExactAndTanhMatchReference) {
  LOOM_SEEDED_RNG(rng);
  for (int64_t n : {1, 7, 1000, 100003})  // 100003: above the single-thread cutoff, odd
    for (bool tanh_approx : {false, true}) {
      const Tensor x = random_tensor({n}, DType::kF32, rng, -8.0f, 8.0f);
      Tensor ref = Tensor::empty({n}, DType::kF32);
      poison(ref);
      reference().gelu(x, ref, tanh_approx);
      for (auto& v : fast_variants()) {
        Tensor y = Tensor::empty({n}, DType::kF32);
        poison(y);
        v.ops->gelu(x, y, tanh_approx);
        EXPECT_TRUE(all_close(y, ref, kGeluAtol, kGeluRtol))
            << v.name << " " << case_name({{"n", n}, {"tanh", tanh_approx}});
        Tensor inplace = clone(x);  // y aliases x
        v.ops->gelu(inplace, inplace, tanh_approx);
        EXPECT_TRUE(all_close(inplace, ref, kGeluAtol, kGeluRtol)) << v.name << " in place";
      }
    }
}

// embedding doubles as the row gather of activations (window permutations): an f32 activation
// table is copied exactly, rows in any order and repeated.
TEST(CpuOpsEmbedding, GathersActivationRowsExactly) {
  LOOM_SEEDED_RNG(rng);
  const Tensor x = random_tensor({37, 80}, DType::kF32, rng, -5.0f, 5.0f);
  std::vector<int32_t> rows(50);
  for (auto& r : rows) r = static_cast<int32_t>(uniform_int(rng, 0, 36));
  Tensor ref = Tensor::empty({50, 80}, DType::kF32);
  poison(ref);
  reference().embedding(x, rows, ref);
  for (int64_t i = 0; i < 50; ++i)
    for (int64_t j = 0; j < 80; ++j)
      ASSERT_EQ(ref.data_as<float>()[i * 80 + j], x.data_as<float>()[rows[i] * 80 + j]);
  for (auto& v : fast_variants()) {
    Tensor y = Tensor::empty({50, 80}, DType::kF32);
    poison(y);
    v.ops->embedding(x, rows, y);
    EXPECT_TRUE(bit_equal(y, ref)) << v.name;
  }
}

}  // namespace
}  // namespace loom::ops
