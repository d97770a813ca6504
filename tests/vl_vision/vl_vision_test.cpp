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

#include "../common/vision_golden.h"

namespace {

using loom::core::DType;
using loom::core::StatusCode;
using loom::core::Tensor;
using loom::models::Checkpoint;
using loom::models::qwen_vl::parse_vision_config;
using loom::models::qwen_vl::Qwen25VisionTower;
using loom::models::qwen_vl::VisionConfig;
using loom::testing::diff_tensors;
using loom::testing::expect_f32_close;
using loom::testing::TensorDiff;
using Grids = loom::testing::VisionGrids;

const loom::testing::VisionGoldens& fx() {
  return loom::testing::vision_goldens("vl_vision");
}
VisionConfig fixture_config() {
  return fx().vision_config(parse_vision_config);
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
  const nlohmann::json base = fx().config().at("vision_config");
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
  for (const std::string& name : fx().case_names()) {
    const Grids grids = fx().grids(name);
    auto layout = loom::models::qwen_vl::make_vision_layout(c, grids);
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    const Tensor want = fx().get(name + ".window_index");
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

class VlVisionGolden : public ::testing::TestWithParam<loom::testing::HostBackend> {};

// Tolerance, per stage and on the result: rel L2 < 1e-5 and max abs < 1e-4 * max(1, RMS of the
// reference tensor). f32 against transformers f32 (eager attention). The residual stream grows to RMS ~8
// (max ~33, where one f32 ulp is ~4e-6) through the 4 blocks, so the max-abs bound is stated in units of
// the tensor's RMS; measured: rel L2 <= ~3.2e-6 and max abs <= ~1.9e-4 (blk.3 at RMS 7.7) on both
// backends. A wrong window, index, rope frequency or segment gives errors of order 1.
TEST_P(VlVisionGolden, MatchesTransformers) {
  auto ops = GetParam().make();
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  auto tower = Qwen25VisionTower::load(fixture_config(), *ckpt, *ops);
  ASSERT_TRUE(tower.ok()) << tower.status().to_string();
  EXPECT_EQ((*tower)->weight_prefix(), "model.visual.");
  const auto names = fx().case_names();
  ASSERT_EQ(names.size(), 2u);
  for (const std::string& name : names) {
    loom::testing::DumpRecorder dumps;
    auto out = (*tower)->forward(fx().get(name + ".pixel_values"), fx().grids(name), dumps.hook());
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    for (const auto& [dump_name, golden_suffix] : loom::testing::vision_stages(4)) {
      ASSERT_TRUE(dumps.has(dump_name)) << dump_name;
      expect_f32_close(dumps.at(dump_name), fx().get(name + golden_suffix),
                       std::string("[") + GetParam().name + "] " + name + " " + dump_name);
    }
    expect_f32_close(*out, fx().get(name + ".merger"),
                     std::string("[") + GetParam().name + "] " + name + " result");
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, VlVisionGolden, ::testing::ValuesIn(loom::testing::host_backends()),
                         loom::testing::host_backend_name);

// Older checkpoints name the weights "visual.*": same weights renamed give the same output.
TEST(VlVisionTower, AcceptsLegacyWeightPrefix) {
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok());
  const Checkpoint legacy =
      loom::testing::legacy_prefix_copy(*ckpt, std::string(LOOM_BINARY_DIR) + "/vl_vision_legacy");

  auto ops = loom::ops::make_reference_ops();
  auto a = Qwen25VisionTower::load(fixture_config(), *ckpt, *ops);
  auto b = Qwen25VisionTower::load(fixture_config(), legacy, *ops);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*b)->weight_prefix(), "visual.");
  const std::string name = fx().case_names().front();
  auto out_a = (*a)->forward(fx().get(name + ".pixel_values"), fx().grids(name));
  auto out_b = (*b)->forward(fx().get(name + ".pixel_values"), fx().grids(name));
  ASSERT_TRUE(out_a.ok() && out_b.ok());
  const TensorDiff d = diff_tensors(*out_b, *out_a);
  EXPECT_EQ(d.max_abs, 0.0);
}

TEST(VlVisionTower, RejectsBadInputs) {
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok());
  auto ops = loom::ops::make_reference_ops();
  const VisionConfig c = fixture_config();
  auto tower = Qwen25VisionTower::load(c, *ckpt, *ops);
  ASSERT_TRUE(tower.ok());
  const Tensor px = fx().get("one_image.pixel_values");  // 64 patches

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
  auto no_vision = Checkpoint::open(fx().dir() + "/goldens.safetensors");
  ASSERT_TRUE(no_vision.ok());
  EXPECT_EQ(Qwen25VisionTower::load(c, *no_vision, *ops).status().code(), StatusCode::kNotFound);
}

}  // namespace
