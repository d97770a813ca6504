// Rotary inverse frequencies and attention factors against transformers' rope init functions
// (goldens: tools/reference/make_rope_goldens.py), and the cos/sin tables built from them.
#include <gtest/gtest.h>

#include <cmath>

#include "golden.h"
#include "models/rope.h"

namespace loom::testing {
namespace {

models::RopeConfig rope_from_json(const nlohmann::json& r) {
  models::RopeConfig c;
  c.type = r.value("rope_type", "default");
  c.theta = r.value("rope_theta", 10000.0);
  c.factor = r.value("factor", 1.0);
  c.beta_fast = r.value("beta_fast", 32.0);
  c.beta_slow = r.value("beta_slow", 1.0);
  c.mscale = r.value("mscale", 0.0);
  c.mscale_all_dim = r.value("mscale_all_dim", 0.0);
  c.low_freq_factor = r.value("low_freq_factor", 1.0);
  c.high_freq_factor = r.value("high_freq_factor", 4.0);
  c.original_max_position_embeddings = r.value("original_max_position_embeddings", int64_t{0});
  return c;
}

TEST(Rope, InvFreqMatchesTransformers) {
  std::ifstream in(fixtures_dir() + "/goldens/rope.json");
  ASSERT_TRUE(in.good());
  nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    std::vector<float> inv;
    float att = 0;
    auto st = models::rope_inv_freq(rope_from_json(c["rope"]), c["head_dim"], c["max_pos"], &inv, &att);
    ASSERT_TRUE(st.ok()) << c["name"] << ": " << st.to_string();
    const std::vector<double> ref = c["inv_freq"];
    ASSERT_EQ(inv.size(), ref.size()) << c["name"];
    for (size_t i = 0; i < inv.size(); ++i)  // f32 pow/divide: within 2 ulp of torch
      EXPECT_NEAR(inv[i], ref[i], 2.5e-7 * std::abs(ref[i])) << c["name"] << " i=" << i;
    EXPECT_NEAR(att, c["attention_factor"].get<double>(), 1e-6) << c["name"];
  }
}

TEST(Rope, TablesHoldCosSinOfPositionTimesFreq) {
  models::RopeConfig rope;
  rope.theta = 10000.0;
  auto t = models::make_rope_tables(rope, 64, 4096, 100);
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->rotary_dim, 64);
  EXPECT_EQ(t->cos.shape(), (core::Shape{100, 32}));
  // Position 0 is the identity rotation.
  for (int i = 0; i < 32; ++i) {
    EXPECT_EQ(t->cos.data_as<float>()[i], 1.0f);
    EXPECT_EQ(t->sin.data_as<float>()[i], 0.0f);
  }
  // Frequency 0 is 1 rad per position.
  EXPECT_NEAR(t->cos.data_as<float>()[37 * 32], std::cos(37.0), 1e-5);
  EXPECT_NEAR(t->sin.data_as<float>()[37 * 32], std::sin(37.0), 1e-5);
}

TEST(Rope, UnknownTypeIsAnError) {
  models::RopeConfig rope;
  rope.type = "longrope";
  std::vector<float> inv;
  float att;
  auto st = models::rope_inv_freq(rope, 64, 4096, &inv, &att);
  EXPECT_EQ(st.code(), core::StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("longrope"), std::string::npos);
}

}  // namespace
}  // namespace loom::testing
