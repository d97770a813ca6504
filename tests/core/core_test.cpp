#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "core/status.h"
#include "core/tensor.h"

namespace loom::core {
namespace {

Expected<int> parse_positive(int v) {
  if (v <= 0) return invalid_argument("must be positive, got " + std::to_string(v));
  return v;
}

Status use_parse(int v, int* out) {
  LOOM_ASSIGN_OR_RETURN(*out, parse_positive(v));
  return {};
}

TEST(Status, PropagatesErrorsWithContext) {
  int out = 0;
  EXPECT_TRUE(use_parse(3, &out).ok());
  EXPECT_EQ(out, 3);
  Status st = use_parse(-1, &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.with_context("config").to_string(), "InvalidArgument: config: must be positive, got -1");
}

TEST(DType, Bf16RoundTripIsRoundToNearestEven) {
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + std::ldexp(1.0f, -8))), 1.0f);
  // 1 + 3*2^-8 is halfway, ties to even upward.
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))), 1.0f + std::ldexp(1.0f, -6));
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16ConversionsMatchIeee) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> bits(0, 0xffff);
  for (int i = 0; i < 20000; ++i) {
    auto h = static_cast<uint16_t>(bits(rng));
    if (((h >> 10) & 0x1f) == 0x1f) continue;  // inf/nan
    EXPECT_EQ(f32_to_f16(f16_to_f32(h)), h) << std::hex << h;
  }
  EXPECT_EQ(f32_to_f16(1e6f), 0x7c00);
}

TEST(Tensor, ReshapeAndSliceShareStorage) {
  Tensor t = Tensor::zeros({4, 3}, DType::kF32);
  t.data_as<float>()[7] = 5.0f;
  Tensor rows = t.slice_rows(2, 4);
  EXPECT_EQ(rows.shape(), (Shape{2, 3}));
  EXPECT_EQ(rows.data_as<float>()[1], 5.0f);
  EXPECT_EQ(t.reshape({12}).data_as<float>()[7], 5.0f);
}

}  // namespace
}  // namespace loom::core
