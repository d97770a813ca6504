// Qwen2.5-VL vision tower (src/models/qwen_vl/vision_*) against transformers goldens written by
// tools/reference/make_vl_vision_goldens.py into tests/fixtures/vl_vision/.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "models/checkpoint/checkpoint.h"
#include "models/checkpoint/safetensors.h"
#include "models/qwen_vl/vision_config.h"
#include "models/qwen_vl/vision_tower.h"
#include "models/qwen_vl/vision_window.h"
#include "ops/reference_ops.h"

namespace {

using loom::core::DType;
using loom::core::StatusCode;
using loom::core::Tensor;
using loom::models::Checkpoint;
using loom::models::qwen_vl::parse_vision_config;
using loom::models::qwen_vl::Qwen25VisionTower;
using loom::models::qwen_vl::VisionConfig;
using Grids = std::vector<std::array<int64_t, 3>>;

const std::string kDir = std::string(LOOM_FIXTURES_DIR) + "/vl_vision";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  LOOM_CHECK(in.good()) << "cannot read " << path;
  return nlohmann::json::parse(in);
}

VisionConfig fixture_config() {
  auto c = parse_vision_config(read_json(kDir + "/config.json").at("vision_config"));
  LOOM_CHECK(c.ok()) << c.status().to_string();
  return *c;
}

const Checkpoint& goldens() {
  static const Checkpoint g = [] {
    auto c = Checkpoint::open(kDir + "/goldens.safetensors");
    LOOM_CHECK(c.ok()) << c.status().to_string();
    return *c;
  }();
  return g;
}

Tensor golden(const std::string& name) {
  auto t = goldens().get(name);
  LOOM_CHECK(t.ok()) << t.status().to_string();
  return *t;
}

std::vector<std::string> case_names() {
  auto f = loom::models::SafetensorsFile::open(kDir + "/goldens.safetensors");
  LOOM_CHECK(f.ok()) << f.status().to_string();
  return nlohmann::json::parse((*f)->metadata().at("cases")).get<std::vector<std::string>>();
}

Grids case_grids(const std::string& name) {
  const Tensor g = golden(name + ".grid_thw");
  LOOM_CHECK(g.dtype() == DType::kI64 && g.rank() == 2 && g.dim(1) == 3);
  Grids out(g.dim(0));
  for (int64_t i = 0; i < g.dim(0); ++i) {
    for (int j = 0; j < 3; ++j) out[i][j] = g.data_as<int64_t>()[i * 3 + j];
  }
  return out;
}

struct Diff {
  double max_abs = 0, rel_l2 = 0, ref_rms = 0;
  bool nan = false;
};
Diff compare(const Tensor& got, const Tensor& want) {
  LOOM_CHECK(got.shape() == want.shape())
      << loom::core::shape_to_string(got.shape()) << " vs " << loom::core::shape_to_string(want.shape());
  Diff d;
  double num = 0, den = 0;
  const float* a = got.data_as<float>();
  const float* b = want.data_as<float>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) d.nan = true;
    const double e = static_cast<double>(a[i]) - b[i];
    d.max_abs = std::max(d.max_abs, std::abs(e));
    num += e * e;
    den += static_cast<double>(b[i]) * b[i];
  }
  d.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  d.ref_rms = std::sqrt(den / std::max<int64_t>(got.numel(), 1));
  return d;
}

TEST(VlVisionConfig, ParsesFixtureConfig) {
  const VisionConfig c = fixture_config();
  EXPECT_EQ(c.depth, 4);
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.intermediate_size, 96);
  EXPECT_EQ(c.patch_size, 7);
  EXPECT_EQ(c.window_size, 28);
  EXPECT_EQ(c.window_units(), 2);
  EXPECT_EQ(c.out_hidden_size, 48);
  EXPECT_EQ(c.fullatt_block_indexes, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(c.patch_dim(), 3 * 2 * 7 * 7);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_TRUE(c.is_full_attention(3));
  EXPECT_FALSE(c.is_full_attention(0));
}

TEST(VlVisionConfig, LegacyFieldsAndDefaults) {
  // Qwen2.5-VL-7B's shipped vision_config spells in_channels "in_chans" and has no rope_parameters.
  auto c = parse_vision_config(nlohmann::json::parse(R"({"depth": 32, "hidden_act": "silu",
      "hidden_size": 1280, "intermediate_size": 3420, "num_heads": 16, "in_chans": 3,
      "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2, "spatial_patch_size": 14,
      "window_size": 112, "fullatt_block_indexes": [7, 15, 23, 31], "tokens_per_second": 2,
      "temporal_patch_size": 2})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->in_channels, 3);
  EXPECT_EQ(c->head_dim(), 80);
  EXPECT_EQ(c->window_units(), 4);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
}

TEST(VlVisionConfig, RejectsBadConfigs) {
  const nlohmann::json base = read_json(kDir + "/config.json").at("vision_config");
  auto expect_error = [&](const char* key, nlohmann::json value, StatusCode code) {
    nlohmann::json j = base;
    j[key] = std::move(value);
    auto c = parse_vision_config(j);
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_EQ(c.status().code(), code) << c.status().to_string();
  };
  expect_error("hidden_act", "gelu", StatusCode::kUnsupported);
  expect_error("fullatt_block_indexes", {1, 4}, StatusCode::kInvalidArgument);
  expect_error("num_heads", 3, StatusCode::kInvalidArgument);   // 64 % 3 != 0
  expect_error("num_heads", 32, StatusCode::kInvalidArgument);  // head_dim 2: not a multiple of 4
  expect_error("window_size", 13, StatusCode::kInvalidArgument);
  expect_error("depth", 0, StatusCode::kInvalidArgument);
  expect_error("hidden_size", "64", StatusCode::kInvalidArgument);
  EXPECT_FALSE(parse_vision_config(nlohmann::json::array()).ok());
}

// The window permutation equals transformers' get_vision_window_index on every golden case.
TEST(VlVisionLayout, WindowIndexMatchesTransformers) {
  const VisionConfig c = fixture_config();
  for (const std::string& name : case_names()) {
    const Grids grids = case_grids(name);
    auto layout = loom::models::qwen_vl::make_vision_layout(c, grids);
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    const Tensor want = golden(name + ".window_index");
    ASSERT_EQ(static_cast<int64_t>(layout->window_index.size()), want.numel()) << name;
    for (int64_t i = 0; i < want.numel(); ++i) {
      ASSERT_EQ(layout->window_index[i], want.data_as<int64_t>()[i]) << name << " unit " << i;
    }
    EXPECT_EQ(layout->cu_window_seqlens.back(), layout->num_patches);
    EXPECT_EQ(layout->cu_seqlens.back(), layout->num_patches);
  }
}

TEST(VlVisionLayout, HandComputedSmallGrid) {
  // merged grid 3 x 3 (h = w = 6 patches), windows of 2 x 2 units -> windows of 4, 2, 2, 1 units.
  VisionConfig c = fixture_config();
  const Grids grids = {{1, 6, 6}};
  auto layout = loom::models::qwen_vl::make_vision_layout(c, grids);
  ASSERT_TRUE(layout.ok());
  EXPECT_EQ(layout->window_index, (std::vector<int32_t>{0, 1, 3, 4, 2, 5, 6, 7, 8}));
  EXPECT_EQ(layout->cu_window_seqlens, (std::vector<int32_t>{0, 16, 24, 32, 36}));
  EXPECT_EQ(layout->cu_seqlens, (std::vector<int32_t>{0, 36}));
  // First patch of window-order unit 4 (= processor unit 2: block row 0, block col 2) sits at (0, 4).
  EXPECT_EQ(layout->pos_h[16], 0);
  EXPECT_EQ(layout->pos_w[16], 4);
  EXPECT_EQ(layout->pos_w[17], 5);
  EXPECT_EQ(layout->pos_h[18], 1);
}

struct BackendCase {
  const char* name;
  std::unique_ptr<loom::ops::Ops> (*make)();
};

std::unique_ptr<loom::ops::Ops> make_reference() {
  return loom::ops::make_reference_ops();
}
std::unique_ptr<loom::ops::Ops> make_cpu() {
  return loom::backends::cpu::make_cpu_ops(2);
}

class VlVisionGolden : public ::testing::TestWithParam<BackendCase> {};

// Tolerance, per stage and on the result: rel L2 < 1e-5 and max abs < 1e-4 * max(1, RMS of the
// reference tensor). f32 against transformers f32 (eager attention). The residual stream grows to RMS ~8
// (max ~33, where one f32 ulp is ~4e-6) through the 4 blocks, so the max-abs bound is stated in units of
// the tensor's RMS; measured: rel L2 <= ~3.2e-6 and max abs <= ~1.9e-4 (blk.3 at RMS 7.7) on both
// backends. A wrong window, index, rope frequency or segment gives errors of order 1.
TEST_P(VlVisionGolden, MatchesTransformers) {
  auto ops = GetParam().make();
  auto ckpt = Checkpoint::open(kDir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  auto tower = Qwen25VisionTower::load(fixture_config(), *ckpt, *ops);
  ASSERT_TRUE(tower.ok()) << tower.status().to_string();
  EXPECT_EQ((*tower)->weight_prefix(), "model.visual.");
  const auto names = case_names();
  ASSERT_EQ(names.size(), 2u);
  for (const std::string& name : names) {
    std::map<std::string, Tensor> dumps;
    loom::models::DumpHook hook = [&](std::string_view n, const Tensor& t) {
      dumps[std::string(n)] = t.to_f32();
    };
    auto out = (*tower)->forward(golden(name + ".pixel_values"), case_grids(name), &hook);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    std::vector<std::pair<std::string, std::string>> stages = {{"vision.patch_embed", ".patch_embed"}};
    for (int b = 0; b < 4; ++b) {
      stages.push_back({"vision.blk." + std::to_string(b) + ".out", ".blk." + std::to_string(b) + ".out"});
    }
    stages.push_back({"vision.merger", ".merger"});
    for (const auto& [dump_name, golden_suffix] : stages) {
      ASSERT_TRUE(dumps.count(dump_name)) << dump_name;
      const Diff d = compare(dumps[dump_name], golden(name + golden_suffix));
      EXPECT_FALSE(d.nan) << name << " " << dump_name;
      EXPECT_LT(d.rel_l2, 1e-5) << name << " " << dump_name << " max_abs " << d.max_abs;
      EXPECT_LT(d.max_abs, 1e-4 * std::max(1.0, d.ref_rms))
          << name << " " << dump_name << " rel_l2 " << d.rel_l2;
      std::printf("[%s] %-10s %-20s max_abs %.3g rel_l2 %.3g (ref rms %.3g)\n", GetParam().name, name.c_str(),
                  dump_name.c_str(), d.max_abs, d.rel_l2, d.ref_rms);
    }
    const Diff d = compare(*out, golden(name + ".merger"));
    EXPECT_LT(d.rel_l2, 1e-5);
    EXPECT_LT(d.max_abs, 1e-4 * std::max(1.0, d.ref_rms));
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, VlVisionGolden,
                         ::testing::Values(BackendCase{"reference", &make_reference},
                                           BackendCase{"cpu", &make_cpu}),
                         [](const auto& info) { return std::string(info.param.name); });

// Older checkpoints name the weights "visual.*": same weights renamed give the same output.
TEST(VlVisionTower, AcceptsLegacyWeightPrefix) {
  auto ckpt = Checkpoint::open(kDir);
  ASSERT_TRUE(ckpt.ok());
  std::vector<std::pair<std::string, Tensor>> renamed;
  for (const std::string& n : ckpt->names()) {
    ASSERT_EQ(n.rfind("model.visual.", 0), 0u) << n;
    renamed.emplace_back(n.substr(6), *ckpt->get(n));
  }
  const std::string dir = std::string(LOOM_BINARY_DIR) + "/vl_vision_legacy";
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(loom::models::write_safetensors(dir + "/model.safetensors", renamed).ok());
  auto legacy = Checkpoint::open(dir);
  ASSERT_TRUE(legacy.ok()) << legacy.status().to_string();

  auto ops = loom::ops::make_reference_ops();
  auto a = Qwen25VisionTower::load(fixture_config(), *ckpt, *ops);
  auto b = Qwen25VisionTower::load(fixture_config(), *legacy, *ops);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*b)->weight_prefix(), "visual.");
  const std::string name = case_names().front();
  auto out_a = (*a)->forward(golden(name + ".pixel_values"), case_grids(name));
  auto out_b = (*b)->forward(golden(name + ".pixel_values"), case_grids(name));
  ASSERT_TRUE(out_a.ok() && out_b.ok());
  const Diff d = compare(*out_b, *out_a);
  EXPECT_EQ(d.max_abs, 0.0);
}

TEST(VlVisionTower, RejectsBadInputs) {
  auto ckpt = Checkpoint::open(kDir);
  ASSERT_TRUE(ckpt.ok());
  auto ops = loom::ops::make_reference_ops();
  const VisionConfig c = fixture_config();
  auto tower = Qwen25VisionTower::load(c, *ckpt, *ops);
  ASSERT_TRUE(tower.ok());
  const Tensor px = golden("one_image.pixel_values");  // 64 patches

  const Grids wrong_count = {{1, 8, 10}};
  auto r1 = (*tower)->forward(px, wrong_count);
  EXPECT_EQ(r1.status().code(), StatusCode::kInvalidArgument) << r1.status().to_string();
  const Grids odd = {{1, 8, 7}};
  EXPECT_EQ((*tower)->forward(px, odd).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*tower)->forward(px, Grids{}).status().code(), StatusCode::kInvalidArgument);
  const Grids ok = {{1, 8, 8}};
  EXPECT_EQ((*tower)->forward(px.reshape({32, 2 * c.patch_dim()}), ok).status().code(),
            StatusCode::kInvalidArgument);

  // A config that disagrees with the weights' shapes, and a checkpoint without vision weights.
  VisionConfig bigger = c;
  bigger.intermediate_size = 128;
  auto bad = Qwen25VisionTower::load(bigger, *ckpt, *ops);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().to_string();
  auto no_vision = Checkpoint::open(kDir + "/goldens.safetensors");
  ASSERT_TRUE(no_vision.ok());
  EXPECT_EQ(Qwen25VisionTower::load(c, *no_vision, *ops).status().code(), StatusCode::kNotFound);
}

}  // namespace
