// Hand-computed cases for the reference ops, so the oracle the fast backends are compared
// with is itself checked against answers worked out on paper.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "op_test_util.h"
#include "ops/reference_ops.h"

namespace loom::ops {
namespace {

using core::DType;

using testing::fill;
using testing::poison;

Tensor from_values(core::Shape shape, const std::vector<float>& v, DType dtype = DType::kF32) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  EXPECT_EQ(t.numel(), static_cast<int64_t>(v.size()));
  for (size_t i = 0; i < v.size(); ++i) testing::set_elem(t, static_cast<int64_t>(i), v[i]);
  return t;
}

float at(const Tensor& t, int64_t i) {
  return t.data_as<float>()[i];
}

class ReferenceOpsTest : public ::testing::Test {
 protected:
  std::unique_ptr<Ops> ops_ = make_reference_ops();
};

TEST_F(ReferenceOpsTest, LinearSmallIntegersAllWeightDtypes) {
  // x [1, 2] = [1, 2]; w [[3, 4], [5, 6]]; bias [0.5, -1]  ->  [1*3+2*4+0.5, 1*5+2*6-1] = [11.5, 16]
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Tensor x = from_values({1, 2}, {1, 2});
    const Tensor w = from_values({2, 2}, {3, 4, 5, 6}, wt);
    const Tensor b = from_values({2}, {0.5f, -1.0f}, wt);
    Tensor y = Tensor::empty({1, 2}, DType::kF32);
    poison(y);
    ops_->linear(x, w, b, y);
    EXPECT_EQ(at(y, 0), 11.5f) << core::dtype_name(wt);
    EXPECT_EQ(at(y, 1), 16.0f) << core::dtype_name(wt);
    ops_->linear(x, w, Tensor(), y);
    EXPECT_EQ(at(y, 0), 11.0f);
    EXPECT_EQ(at(y, 1), 17.0f);
  }
}

TEST_F(ReferenceOpsTest, RmsNormOfConstantRow) {
  // Row of 2s, eps 0: mean(x^2) = 4, x / 2 = 1, so y = weight exactly.
  const Tensor x = from_values({1, 4}, {2, 2, 2, 2});
  const Tensor w = from_values({4}, {0.5f, -1.0f, 2.0f, 3.0f});
  Tensor y = Tensor::empty({1, 4}, DType::kF32);
  poison(y);
  ops_->rms_norm(x, w, 0.0f, y);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(at(y, i), at(w, i));
  // With eps: y = w * c / sqrt(c^2 + eps), here c = -3, eps = 7: -3 / 4.
  const Tensor x2 = from_values({2, 2}, {-3, -3, -3, -3});
  const Tensor w2 = from_values({2}, {1.0f, 2.0f}, DType::kBF16);
  Tensor y2 = Tensor::empty({2, 2}, DType::kF32);
  ops_->rms_norm(x2, w2, 7.0f, y2);
  EXPECT_FLOAT_EQ(at(y2, 0), -0.75f);
  EXPECT_FLOAT_EQ(at(y2, 1), -1.5f);
  EXPECT_FLOAT_EQ(at(y2, 3), -1.5f);
}

TEST_F(ReferenceOpsTest, RmsNormInPlaceAndAddRmsNorm) {
  // In place (y aliases x): [3, 4] -> rms = sqrt(12.5); y = x / rms.
  Tensor x = from_values({1, 2}, {3, 4});
  const Tensor w = from_values({2}, {1, 1});
  ops_->rms_norm(x, w, 0.0f, x);
  EXPECT_FLOAT_EQ(at(x, 0), 3.0f / std::sqrt(12.5f));
  EXPECT_FLOAT_EQ(at(x, 1), 4.0f / std::sqrt(12.5f));
  // residual [1, 1] + x [1, 3] = [2, 4]; rms = sqrt(10).
  Tensor residual = from_values({1, 2}, {1, 1});
  const Tensor add = from_values({1, 2}, {1, 3});
  Tensor y = Tensor::empty({1, 2}, DType::kF32);
  poison(y);
  ops_->add_rms_norm(residual, add, w, 0.0f, y);
  EXPECT_EQ(at(residual, 0), 2.0f);
  EXPECT_EQ(at(residual, 1), 4.0f);
  EXPECT_FLOAT_EQ(at(y, 0), 2.0f / std::sqrt(10.0f));
  EXPECT_FLOAT_EQ(at(y, 1), 4.0f / std::sqrt(10.0f));
}

TEST_F(ReferenceOpsTest, RopePositionZeroIsIdentityAndQuarterTurnRotates) {
  // Tables for 2 positions, rotary_dim 4 (half 2): position 0 = angle 0, position 1 = 90 degrees.
  const Tensor cos = from_values({2, 2}, {1, 1, 0, 0});
  const Tensor sin = from_values({2, 2}, {0, 0, 1, 1});
  // x [2 tokens, 1 head, head_dim 6]: the last 2 dims are beyond rotary_dim and pass through.
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  Tensor x = from_values({2, 1, 6}, {1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
  const std::vector<int32_t> positions = {0, 1};
  ops_->rope(x, positions, cos, sin, RopeParams{4});
  for (int i = 0; i < 6; ++i) EXPECT_EQ(at(x, i), v[i]) << "position 0, dim " << i;
  // Quarter turn: out[i] = -x[i + half], out[i + half] = x[i].
  const std::vector<float> want = {-3, -4, 1, 2, 5, 6};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(at(x, 6 + i), want[i]) << "position 1, dim " << i;
}

TEST_F(ReferenceOpsTest, SiluMulKnownValues) {
  // silu(0) = 0; silu(1) = 1 / (1 + e^-1) = 0.7310585786...; silu(-1) = -0.2689414214...
  const Tensor gu = from_values({1, 6}, {0, 1, -1, 5, 2, 3});
  Tensor out = Tensor::empty({1, 3}, DType::kF32);
  poison(out);
  ops_->silu_mul(gu, out);
  EXPECT_EQ(at(out, 0), 0.0f);
  EXPECT_FLOAT_EQ(at(out, 1), 0.7310585786f * 2);
  EXPECT_FLOAT_EQ(at(out, 2), -0.2689414214f * 3);
}

TEST_F(ReferenceOpsTest, LayerNormKnownValuesBiasAndInPlace) {
  // Row [1, 2, 3, 4]: mean 2.5, biased variance 1.25; (x - mean) / sqrt(1.25) * w + b
  // (values from torch.nn.functional.layer_norm in float64, eps 0).
  const Tensor x = from_values({2, 4}, {1, 2, 3, 4, 5, 5, 5, 5});
  for (DType wt : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Tensor w = from_values({4}, {1, 2, 0.5f, -1}, wt);
    const Tensor b = from_values({4}, {0, 1, -1, 0.25f}, wt);
    Tensor y = Tensor::empty({2, 4}, DType::kF32);
    poison(y);
    ops_->layer_norm(x, w, b, 0.0f, y);
    const std::vector<float> want = {-1.3416407865f, 0.1055728090f, -0.7763932023f, -1.0916407865f};
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(at(y, i), want[i]) << core::dtype_name(wt) << " " << i;
    // A constant row has zero variance: the output is the bias (eps keeps the division finite).
    poison(y);
    ops_->layer_norm(x, w, b, 1e-5f, y);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(at(y, 4 + i), at(b.to_f32(), i)) << core::dtype_name(wt);
    // No bias; y aliases x.
    Tensor inplace = testing::clone(x);
    ops_->layer_norm(inplace, w, Tensor(), 0.0f, inplace);
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(at(inplace, i), want[i] - at(b.to_f32(), i));
  }
}

TEST_F(ReferenceOpsTest, GeluExactAndTanhKnownValues) {
  // torch.nn.functional.gelu in float64, approximate="none" and "tanh".
  const Tensor x = from_values({7}, {-3, -1, 0, 0.5f, 1, 2, 6});
  const std::vector<double> exact = {-0.00404969409489031, -0.15865525393145702, 0.0,
                                     0.34573123063700656,  0.841344746068543,    1.9544997361036416,
                                     5.999999994080474};
  const std::vector<double> tanh = {-0.0036373920817729943, -0.15880800939172324, 0.0,
                                    0.34571400982514394,    0.8411919906082768,   1.954597694087775,
                                    5.9999999999156035};
  Tensor y = Tensor::empty({7}, DType::kF32);
  poison(y);
  ops_->gelu(x, y, false);
  for (int i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(at(y, i), static_cast<float>(exact[i])) << i;
  Tensor t = testing::clone(x);  // y aliases x
  ops_->gelu(t, t, true);
  for (int i = 0; i < 7; ++i) EXPECT_FLOAT_EQ(at(t, i), static_cast<float>(tanh[i])) << i;
}

TEST_F(ReferenceOpsTest, EmbeddingGathersAndUpcastsExactly) {
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    const Tensor table = from_values({3, 2}, {0.5f, -2.0f, 1.25f, 3.0f, -0.75f, 8.0f}, t);
    const std::vector<int32_t> ids = {2, 0, 2};
    Tensor out = Tensor::empty({3, 2}, DType::kF32);
    poison(out);
    ops_->embedding(table, ids, out);
    const std::vector<float> want = {-0.75f, 8.0f, 0.5f, -2.0f, -0.75f, 8.0f};
    for (int i = 0; i < 6; ++i) EXPECT_EQ(at(out, i), want[i]) << core::dtype_name(t);
  }
}

TEST_F(ReferenceOpsTest, WriteKvScattersToSlotsAndRoundsToCacheDtype) {
  // Caches [3 blocks, 2 slots, 1 head, 2 dims]; tokens go to slots 5 and 0.
  Tensor k = from_values({2, 1, 2}, {1, 2, 3, 4});
  Tensor v = from_values({2, 1, 2}, {1.0f + std::ldexp(1.0f, -8), 6, 7, 8});
  Tensor kc = Tensor::zeros({3, 2, 1, 2}, DType::kBF16), vc = Tensor::zeros({3, 2, 1, 2}, DType::kBF16);
  const std::vector<int32_t> slots = {5, 0};
  ops_->write_kv(k, v, slots, kc, vc);
  const Tensor kf = kc.to_f32(), vf = vc.to_f32();
  EXPECT_EQ(at(kf, 10), 1.0f);
  EXPECT_EQ(at(kf, 11), 2.0f);
  EXPECT_EQ(at(kf, 0), 3.0f);
  EXPECT_EQ(at(kf, 1), 4.0f);
  EXPECT_EQ(at(vf, 10), 1.0f);  // 1 + 2^-8 ties to even in bf16
  EXPECT_EQ(at(kf, 4), 0.0f);   // untouched slot
}

// Attention fixtures: 1 sequence, caches with block_size 2, blocks placed out of order.
struct TinyAttention {
  int64_t q_heads, kv_heads, head_dim, ctx;
  Tensor kc, vc;
  std::vector<int32_t> table;
  TinyAttention(int64_t qh, int64_t kvh, int64_t d, int64_t ctx_len)
      : q_heads(qh), kv_heads(kvh), head_dim(d), ctx(ctx_len) {
    const int64_t blocks = (ctx + 1) / 2;
    kc = Tensor::empty({blocks + 2, 2, kvh, d}, DType::kF32);
    vc = Tensor::empty({blocks + 2, 2, kvh, d}, DType::kF32);
    poison(kc);  // anything read outside the context shows up as NaN
    poison(vc);
    for (int64_t b = 0; b < blocks; ++b) table.push_back(static_cast<int32_t>(blocks + 1 - b));
  }
  float* k(int64_t t, int64_t g) {
    return kc.data_as<float>() + ((table[t / 2] * 2 + t % 2) * kv_heads + g) * head_dim;
  }
  float* v(int64_t t, int64_t g) {
    return vc.data_as<float>() + ((table[t / 2] * 2 + t % 2) * kv_heads + g) * head_dim;
  }
  PagedAttentionParams params(const std::vector<int32_t>& indptr, const std::vector<int32_t>& lens) const {
    PagedAttentionParams p;
    p.q_indptr = indptr;
    p.kv_lens = lens;
    p.block_table = table;
    p.max_blocks_per_seq = static_cast<int32_t>(table.size());
    p.block_size = 2;
    p.scale = 1.0f;
    return p;
  }
};

TEST_F(ReferenceOpsTest, AttentionSingleKeyReturnsItsValuePerKvHead) {
  // GQA 2 q heads per kv head; one context token; output head h = V[h / 2].
  TinyAttention a(4, 2, 3, 1);
  for (int g = 0; g < 2; ++g)
    for (int e = 0; e < 3; ++e) {
      a.k(0, g)[e] = 0.1f * (e + 1);
      a.v(0, g)[e] = 10.0f * g + e;
    }
  Tensor q = from_values({1, 4, 3}, std::vector<float>(12, 7.0f));
  Tensor out = Tensor::empty({1, 4, 3}, DType::kF32);
  poison(out);
  const std::vector<int32_t> indptr = {0, 1}, lens = {1};
  ops_->paged_attention(q, a.kc, a.vc, a.params(indptr, lens), out);
  for (int h = 0; h < 4; ++h)
    for (int e = 0; e < 3; ++e)
      EXPECT_EQ(at(out, h * 3 + e), 10.0f * (h / 2) + e) << "head " << h << " dim " << e;
}

TEST_F(ReferenceOpsTest, AttentionTwoKeysKnownWeights) {
  // q = [1, 0], k0 = [0, 0], k1 = [ln 3, 0], scale 1: scores 0, ln 3 -> weights 1/4, 3/4.
  TinyAttention a(1, 1, 2, 2);
  a.k(0, 0)[0] = 0;
  a.k(0, 0)[1] = 0;
  a.k(1, 0)[0] = std::log(3.0f);
  a.k(1, 0)[1] = 0;
  a.v(0, 0)[0] = 4;
  a.v(0, 0)[1] = -8;
  a.v(1, 0)[0] = 8;
  a.v(1, 0)[1] = 4;
  Tensor q = from_values({1, 1, 2}, {1, 0});
  Tensor out = Tensor::empty({1, 1, 2}, DType::kF32);
  poison(out);
  const std::vector<int32_t> indptr = {0, 1}, lens = {2};
  ops_->paged_attention(q, a.kc, a.vc, a.params(indptr, lens), out);
  EXPECT_NEAR(at(out, 0), 0.25 * 4 + 0.75 * 8, 1e-6);
  EXPECT_NEAR(at(out, 1), 0.25 * -8 + 0.75 * 4, 1e-6);
}

TEST_F(ReferenceOpsTest, AttentionCausalWindowAndNonCausalMasks) {
  // Prefill of 3 tokens, identical keys (uniform weights over what is visible), V[t] = t.
  TinyAttention a(1, 1, 1, 3);
  for (int t = 0; t < 3; ++t) {
    a.k(t, 0)[0] = 1.0f;
    a.v(t, 0)[0] = static_cast<float>(t);
  }
  Tensor q = from_values({3, 1, 1}, {0.5f, -2.0f, 3.0f});
  Tensor out = Tensor::empty({3, 1, 1}, DType::kF32);
  const std::vector<int32_t> indptr = {0, 3}, lens = {3};
  PagedAttentionParams p = a.params(indptr, lens);
  poison(out);
  ops_->paged_attention(q, a.kc, a.vc, p, out);  // causal: means of V[0..i]
  EXPECT_FLOAT_EQ(at(out, 0), 0.0f);
  EXPECT_FLOAT_EQ(at(out, 1), 0.5f);
  EXPECT_FLOAT_EQ(at(out, 2), 1.0f);
  p.sliding_window = 2;  // keys pos > qpos - 2
  poison(out);
  ops_->paged_attention(q, a.kc, a.vc, p, out);
  EXPECT_FLOAT_EQ(at(out, 0), 0.0f);
  EXPECT_FLOAT_EQ(at(out, 1), 0.5f);
  EXPECT_FLOAT_EQ(at(out, 2), 1.5f);
  p.sliding_window = 1;  // only itself
  ops_->paged_attention(q, a.kc, a.vc, p, out);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(at(out, i), static_cast<float>(i));
  p.sliding_window = 0;
  p.causal = false;  // every query sees all 3
  poison(out);
  ops_->paged_attention(q, a.kc, a.vc, p, out);
  for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(at(out, i), 1.0f);
}

TEST_F(ReferenceOpsTest, AttentionDecodeSeesWholeHistory) {
  // Two sequences: a decode step with 3 tokens of history, and a 1-token prefill.
  TinyAttention a(1, 1, 1, 4);
  for (int t = 0; t < 4; ++t) {
    a.k(t, 0)[0] = 0.0f;  // all scores 0: uniform
    a.v(t, 0)[0] = static_cast<float>(t * t);
  }
  // Sequence 1 reuses the same block table (both point at the same context here).
  std::vector<int32_t> table2 = a.table;
  table2.insert(table2.end(), a.table.begin(), a.table.end());
  Tensor q = from_values({2, 1, 1}, {1, 1});
  Tensor out = Tensor::empty({2, 1, 1}, DType::kF32);
  poison(out);
  const std::vector<int32_t> indptr = {0, 1, 2}, lens = {4, 1};
  PagedAttentionParams p = a.params(indptr, lens);
  p.block_table = table2;
  ops_->paged_attention(q, a.kc, a.vc, p, out);
  EXPECT_FLOAT_EQ(at(out, 0), (0 + 1 + 4 + 9) / 4.0f);
  EXPECT_FLOAT_EQ(at(out, 1), 0.0f);
}

TEST(ReferenceOpsDeathTest, ContractViolationsAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto ops = make_reference_ops();
  Tensor table = Tensor::zeros({4, 2}, DType::kF32);
  Tensor out = Tensor::empty({1, 2}, DType::kF32);
  const std::vector<int32_t> bad_id = {4};
  EXPECT_DEATH(ops->embedding(table, bad_id, out), "embedding id 4 of 4");
  Tensor x = Tensor::zeros({2, 3}, DType::kF32), w = Tensor::zeros({5, 4}, DType::kBF16);
  Tensor y = Tensor::empty({2, 5}, DType::kF32);
  EXPECT_DEATH(ops->linear(x, w, Tensor(), y), "linear shapes");
  TinyAttention a(1, 1, 1, 2);
  Tensor q = Tensor::zeros({3, 1, 1}, DType::kF32), o = Tensor::empty({3, 1, 1}, DType::kF32);
  const std::vector<int32_t> indptr = {0, 3}, lens = {2};
  EXPECT_DEATH(ops->paged_attention(q, a.kc, a.vc, a.params(indptr, lens), o), "q_len 3 kv_len 2");
  Tensor ln_w = Tensor::zeros({3}, DType::kF32), ln_b = Tensor::zeros({4}, DType::kF32);
  Tensor ln_y = Tensor::empty({2, 3}, DType::kF32);
  EXPECT_DEATH(ops->layer_norm(x, w, Tensor(), 1e-6f, ln_y), "layer_norm x");
  EXPECT_DEATH(ops->layer_norm(x, ln_w, ln_b, 1e-6f, ln_y), "layer_norm bias has 4 elements");
  Tensor half = Tensor::empty({2, 3}, DType::kBF16);
  EXPECT_DEATH(ops->gelu(x, half, false), "gelu y must be f32");
}

}  // namespace
}  // namespace loom::ops
