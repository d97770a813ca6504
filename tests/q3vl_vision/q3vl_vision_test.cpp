// Qwen3-VL vision tower (src/models/qwen3_vl/vision_*) against transformers goldens written by
// tools/reference/make_qwen3vl_vision_goldens.py into tests/fixtures/q3vl_vision/.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/cpu/cpu_ops.h"
#include "models/checkpoint/checkpoint.h"
#include "models/checkpoint/safetensors.h"
#include "models/qwen3_vl/vision_config.h"
#include "models/qwen3_vl/vision_layout.h"
#include "models/qwen3_vl/vision_tower.h"
#include "ops/reference_ops.h"

#include "../common/vision_golden.h"

namespace {

using loom::core::DType;
using loom::core::StatusCode;
using loom::core::Tensor;
using loom::models::Checkpoint;
using loom::models::qwen3_vl::kPosTaps;
using loom::models::qwen3_vl::make_vision_layout;
using loom::models::qwen3_vl::parse_vision_config;
using loom::models::qwen3_vl::Qwen3VisionTower;
using loom::models::qwen3_vl::VisionConfig;
using loom::testing::diff_tensors;
using loom::testing::expect_f32_close;
using loom::testing::TensorDiff;
using Grids = loom::testing::VisionGrids;

const loom::testing::VisionGoldens& fx() {
  return loom::testing::vision_goldens("q3vl_vision");
}
VisionConfig fixture_config() {
  return fx().vision_config(parse_vision_config);
}

TEST(Q3vlVisionConfig, ParsesFixtureConfig) {
  const VisionConfig c = fixture_config();
  EXPECT_EQ(c.depth, 3);
  EXPECT_EQ(c.hidden_size, 32);
  EXPECT_EQ(c.num_heads, 2);
  EXPECT_EQ(c.head_dim(), 16);
  EXPECT_EQ(c.intermediate_size, 48);
  EXPECT_EQ(c.patch_size, 16);
  EXPECT_EQ(c.out_hidden_size, 24);
  EXPECT_EQ(c.num_position_embeddings, 16);
  EXPECT_EQ(c.num_grid_per_side(), 4);
  EXPECT_EQ(c.deepstack_visual_indexes, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.deepstack_slot(1), 1);
  EXPECT_EQ(c.deepstack_slot(2), -1);
  EXPECT_EQ(c.patch_dim(), 3 * 2 * 16 * 16);
  EXPECT_EQ(c.hidden_act, "gelu_pytorch_tanh");
  EXPECT_TRUE(c.mlp_gelu_tanh());
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
}

TEST(Q3vlVisionConfig, ShippedConfigAndDefaults) {
  // Qwen3-VL-8B-Instruct's vision_config as shipped (no rope_parameters: theta 10000).
  auto c = parse_vision_config(nlohmann::json::parse(R"({"deepstack_visual_indexes": [8, 16, 24],
      "depth": 27, "hidden_act": "gelu_pytorch_tanh", "hidden_size": 1152, "in_channels": 3,
      "initializer_range": 0.02, "intermediate_size": 4304, "model_type": "qwen3_vl", "num_heads": 16,
      "num_position_embeddings": 2304, "out_hidden_size": 4096, "patch_size": 16,
      "spatial_merge_size": 2, "temporal_patch_size": 2})"));
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->head_dim(), 72);
  EXPECT_EQ(c->num_grid_per_side(), 48);
  EXPECT_EQ(c->out_hidden_size, 4096);
  EXPECT_DOUBLE_EQ(c->rope_theta, 10000.0);
  // Empty object: transformers' Qwen3VLVisionConfig defaults.
  auto d = parse_vision_config(nlohmann::json::object());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->depth, 27);
  EXPECT_EQ(d->out_hidden_size, 3584);
  EXPECT_EQ(d->deepstack_visual_indexes, (std::vector<int64_t>{8, 16, 24}));
}

TEST(Q3vlVisionConfig, RejectsBadConfigs) {
  const nlohmann::json base = fx().config().at("vision_config");
  auto expect_error = [&](const char* key, nlohmann::json value, StatusCode code) {
    nlohmann::json j = base;
    j[key] = std::move(value);
    auto c = parse_vision_config(j);
    ASSERT_FALSE(c.ok()) << key;
    EXPECT_EQ(c.status().code(), code) << c.status().to_string();
  };
  expect_error("hidden_act", "silu", StatusCode::kUnsupported);
  expect_error("deepstack_visual_indexes", {0, 3}, StatusCode::kInvalidArgument);  // depth 3
  expect_error("deepstack_visual_indexes", {1, 1}, StatusCode::kInvalidArgument);
  expect_error("num_heads", 3, StatusCode::kInvalidArgument);   // 32 % 3 != 0
  expect_error("num_heads", 16, StatusCode::kInvalidArgument);  // head_dim 2: not a multiple of 4
  expect_error("num_position_embeddings", 0, StatusCode::kInvalidArgument);
  expect_error("patch_size", {16, 16}, StatusCode::kInvalidArgument);
  expect_error("depth", 0, StatusCode::kInvalidArgument);
  expect_error("hidden_size", "32", StatusCode::kInvalidArgument);
  expect_error("rope_parameters", {{"rope_type", "default"}}, StatusCode::kUnsupported);
  EXPECT_FALSE(parse_vision_config(nlohmann::json::array()).ok());
}

// Position ids, frame segments and the bilinear taps/weights equal transformers.vision_utils' output
// exactly (the weights bit for bit: same f32 operations in the same order).
TEST(Q3vlVisionLayout, MatchesTransformersExactly) {
  const VisionConfig c = fixture_config();
  for (const std::string& name : fx().case_names()) {
    auto layout = make_vision_layout(c, fx().grids(name));
    ASSERT_TRUE(layout.ok()) << layout.status().to_string();
    const int64_t n = layout->num_patches;
    const Tensor pos = fx().get(name + ".position_ids");
    const Tensor idx = fx().get(name + ".interp_indices");
    const Tensor wts = fx().get(name + ".interp_weights");
    const Tensor cu = fx().get(name + ".cu_seqlens");
    ASSERT_EQ(pos.dim(0), n);
    ASSERT_EQ(idx.numel(), n * kPosTaps);
    ASSERT_EQ(wts.numel(), n * kPosTaps);
    for (int64_t p = 0; p < n; ++p) {
      ASSERT_EQ(layout->pos_h[p], pos.data_as<int64_t>()[2 * p]) << name << " patch " << p;
      ASSERT_EQ(layout->pos_w[p], pos.data_as<int64_t>()[2 * p + 1]) << name << " patch " << p;
    }
    for (int64_t i = 0; i < n * kPosTaps; ++i) {
      ASSERT_EQ(layout->pos_index[i], idx.data_as<int64_t>()[i]) << name << " tap " << i;
      ASSERT_EQ(layout->pos_weight[i], wts.data_as<float>()[i]) << name << " tap " << i;
    }
    ASSERT_EQ(static_cast<int64_t>(layout->cu_seqlens.size()), cu.numel());
    for (int64_t i = 0; i < cu.numel(); ++i) EXPECT_EQ(layout->cu_seqlens[i], cu.data_as<int32_t>()[i]);
  }
}

TEST(Q3vlVisionLayout, HandComputedTaps) {
  // A 2 x 2 grid against the 4 x 4 table: rows/cols 0 and 1 map to table 0 and 3 exactly (align
  // corners), so each patch reads one corner with weight 1 (the clamped second tap has weight 0).
  const VisionConfig c = fixture_config();
  auto layout = make_vision_layout(c, Grids{{1, 2, 2}});
  ASSERT_TRUE(layout.ok());
  const std::vector<int32_t> corner = {0, 3, 12, 15};
  for (int p = 0; p < 4; ++p) {
    EXPECT_EQ(layout->pos_index[p * kPosTaps], corner[p]);
    EXPECT_EQ(layout->pos_weight[p * kPosTaps], 1.0f);
    for (int k = 1; k < kPosTaps; ++k) EXPECT_EQ(layout->pos_weight[p * kPosTaps + k], 0.0f);
  }
  EXPECT_EQ(layout->cu_seqlens, (std::vector<int32_t>{0, 4}));
  EXPECT_EQ(layout->num_units, 1);
}

// The separable form the tower applies (per-axis weight matrices, raster tables per distinct grid
// size, pos_row into them) equals the four-tap form checked against transformers above: for every
// patch, the outer product of its row's and column's axis weights puts the same weight on the same
// table entries as pos_index / pos_weight (f32 products of the same f32 factors: exact).
TEST(Q3vlVisionLayout, SeparableFormEqualsTaps) {
  const VisionConfig c = fixture_config();
  const int64_t side = c.num_grid_per_side(), stride = 8;
  for (const std::string& name : fx().case_names()) {
    auto layout = make_vision_layout(c, fx().grids(name));
    ASSERT_TRUE(layout.ok());
    // Expand each distinct grid's raster table rows into dense [side*side] weight rows.
    std::vector<std::vector<float>> rows;
    for (const auto& [h, w] : layout->pos_grids) {
      std::vector<float> wh(h * stride), ww(w * stride);
      loom::models::qwen3_vl::axis_interpolation(h, side, stride, wh.data());
      loom::models::qwen3_vl::axis_interpolation(w, side, stride, ww.data());
      for (int64_t r = 0; r < h; ++r) {
        for (int64_t q = 0; q < w; ++q) {
          std::vector<float> dense(side * side, 0.0f);
          for (int64_t i = 0; i < stride; ++i) {
            for (int64_t j = 0; j < stride; ++j) {
              const float wt = wh[r * stride + i] * ww[q * stride + j];
              if (i >= side || j >= side) {
                ASSERT_EQ(wt, 0.0f) << "padding column carries weight";
                continue;
              }
              dense[i * side + j] += wt;
            }
          }
          rows.push_back(std::move(dense));
        }
      }
    }
    ASSERT_EQ(static_cast<int64_t>(layout->pos_row.size()), layout->num_patches);
    for (int64_t p = 0; p < layout->num_patches; ++p) {
      const int32_t row = layout->pos_row[p];
      ASSERT_TRUE(row >= 0 && row < static_cast<int32_t>(rows.size())) << name << " patch " << p;
      std::vector<float> taps(side * side, 0.0f);
      for (int k = 0; k < kPosTaps; ++k)
        taps[layout->pos_index[p * kPosTaps + k]] += layout->pos_weight[p * kPosTaps + k];
      for (int64_t e = 0; e < side * side; ++e)
        ASSERT_EQ(rows[row][e], taps[e]) << name << " patch " << p << " table entry " << e;
    }
  }
  // Grids of one size share one table: two 6x8 images and a 2-frame 4x4 video -> two tables.
  auto shared = make_vision_layout(c, Grids{{1, 6, 8}, {2, 4, 4}, {1, 6, 8}});
  ASSERT_TRUE(shared.ok());
  EXPECT_EQ(shared->pos_grids, (std::vector<std::array<int64_t, 2>>{{6, 8}, {4, 4}}));
  EXPECT_EQ(shared->pos_row[0], 0);
  EXPECT_EQ(shared->pos_row[48], 48);       // the video's first patch: table 2 row 0
  EXPECT_EQ(shared->pos_row[48 + 16], 48);  // its second frame reads the same rows
  EXPECT_EQ(shared->pos_row[48 + 32], 0);   // the second 6x8 image reuses table 1
}

class Q3vlVisionGolden : public ::testing::TestWithParam<loom::testing::HostBackend> {};

// Tolerance, per stage and on the results: rel L2 < 1e-5 and max abs < 1e-4 * max(1, RMS of the
// reference tensor). f32 against transformers f32 (eager attention); the only differences are
// summation orders (Conv3d vs GEMM, attention, LayerNorm statistics) and libm ulps of cos/sin/erf/
// tanh. The position embeddings use transformers' taps and weights (checked bit for bit above) in
// separable form (two GEMMs, a few ulp of rounding-order difference). A wrong interpolation tap,
// rope frequency, segment, norm placement or GELU variant gives errors of order 1e-4..1 (see
// GoldensRejectNearVariants). Measured on both backends: rel L2 <= 1.1e-6 and max abs <= 1.3e-5
// (blk.2 at RMS 3) on every stage.
TEST_P(Q3vlVisionGolden, MatchesTransformers) {
  auto ops = GetParam().make();
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  const VisionConfig c = fixture_config();
  auto tower = Qwen3VisionTower::load(c, *ckpt, *ops);
  ASSERT_TRUE(tower.ok()) << tower.status().to_string();
  EXPECT_EQ((*tower)->weight_prefix(), "model.visual.");
  const auto names = fx().case_names();
  ASSERT_EQ(names.size(), 2u);
  for (const std::string& name : names) {
    loom::testing::DumpRecorder dumps;
    auto out = (*tower)->forward(fx().get(name + ".pixel_values"), fx().grids(name), dumps.hook());
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    const std::string label = std::string("[") + GetParam().name + "] " + name;
    for (const auto& [dump_name, golden_suffix] :
         loom::testing::vision_stages(c.depth, /*embed=*/true, c.deepstack_visual_indexes.size())) {
      ASSERT_TRUE(dumps.has(dump_name)) << dump_name;
      expect_f32_close(dumps.at(dump_name), fx().get(name + golden_suffix), label + " " + dump_name);
    }
    // The returned tensors (not only the dumps).
    expect_f32_close(out->embeds, fx().get(name + ".merger"), label + " result");
    ASSERT_EQ(out->deepstack.size(), c.deepstack_visual_indexes.size());
    for (size_t k = 0; k < out->deepstack.size(); ++k) {
      expect_f32_close(out->deepstack[k], fx().get(name + ".deepstack." + std::to_string(k)),
                       label + " result deepstack " + std::to_string(k));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, Q3vlVisionGolden, ::testing::ValuesIn(loom::testing::host_backends()),
                         loom::testing::host_backend_name);

// The goldens and the tolerance tell near variants apart: the exact-erf GELU in the block MLP
// (measured merger rel L2 1.2e-4) or rope theta 1000 (4.6e-2) exceed the rel L2 bound of 1e-5
// above by more than 5x.
TEST(Q3vlVisionTower, GoldensRejectNearVariants) {
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok());
  auto ops = loom::ops::make_reference_ops();
  VisionConfig erf = fixture_config();
  erf.hidden_act = "gelu";
  VisionConfig theta = fixture_config();
  theta.rope_theta = 1000.0;
  for (const VisionConfig& c : {erf, theta}) {
    auto tower = Qwen3VisionTower::load(c, *ckpt, *ops);
    ASSERT_TRUE(tower.ok());
    auto out = (*tower)->forward(fx().get("one_image.pixel_values"), fx().grids("one_image"));
    ASSERT_TRUE(out.ok());
    const TensorDiff d = diff_tensors(out->embeds, fx().get("one_image.merger"));
    std::printf("variant (act %s, theta %g): merger rel_l2 %.3g\n", c.hidden_act.c_str(), c.rope_theta,
                d.rel_l2);
    EXPECT_GT(d.rel_l2, 5e-5);
  }
}

// Batching: the two-grid case equals each grid run alone (attention never crosses images/frames).
TEST(Q3vlVisionTower, BatchEqualsSeparateRuns) {
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok());
  auto ops = loom::ops::make_reference_ops();
  auto tower = Qwen3VisionTower::load(fixture_config(), *ckpt, *ops);
  ASSERT_TRUE(tower.ok());
  const Grids grids = fx().grids("mixed");
  const Tensor px = fx().get("mixed.pixel_values");
  auto both = (*tower)->forward(px, grids);
  ASSERT_TRUE(both.ok());
  int64_t row = 0, unit = 0;
  for (const auto& g : grids) {
    const int64_t patches = g[0] * g[1] * g[2];
    Tensor part = Tensor::empty({patches, px.dim(1)}, DType::kF32);
    std::memcpy(part.data(), px.data_as<float>() + row * px.dim(1), part.nbytes());
    auto alone = (*tower)->forward(part, Grids{g});
    ASSERT_TRUE(alone.ok());
    const int64_t units = patches / 4, width = alone->embeds.dim(1);
    auto slice = [&](const Tensor& t) {
      return Tensor::borrow(t.data_as<float>() + unit * width, {units, width}, DType::kF32,
                            loom::core::Device::kCpu, nullptr);
    };
    EXPECT_LT(diff_tensors(alone->embeds, slice(both->embeds)).max_abs, 1e-5);
    for (size_t k = 0; k < alone->deepstack.size(); ++k) {
      EXPECT_LT(diff_tensors(alone->deepstack[k], slice(both->deepstack[k])).max_abs, 1e-5);
    }
    row += patches;
    unit += units;
  }
}

// Older checkpoints name the weights "visual.*": same weights renamed give the same output.
TEST(Q3vlVisionTower, AcceptsLegacyWeightPrefix) {
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok());
  const Checkpoint legacy =
      loom::testing::legacy_prefix_copy(*ckpt, std::string(LOOM_BINARY_DIR) + "/q3vl_vision_legacy");

  auto ops = loom::ops::make_reference_ops();
  auto a = Qwen3VisionTower::load(fixture_config(), *ckpt, *ops);
  auto b = Qwen3VisionTower::load(fixture_config(), legacy, *ops);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*b)->weight_prefix(), "visual.");
  const std::string name = fx().case_names().front();
  auto out_a = (*a)->forward(fx().get(name + ".pixel_values"), fx().grids(name));
  auto out_b = (*b)->forward(fx().get(name + ".pixel_values"), fx().grids(name));
  ASSERT_TRUE(out_a.ok() && out_b.ok());
  EXPECT_EQ(diff_tensors(out_b->embeds, out_a->embeds).max_abs, 0.0);
  ASSERT_EQ(out_b->deepstack.size(), 2u);
  EXPECT_EQ(diff_tensors(out_b->deepstack[1], out_a->deepstack[1]).max_abs, 0.0);
}

TEST(Q3vlVisionTower, RejectsBadInputs) {
  auto ckpt = Checkpoint::open(fx().dir());
  ASSERT_TRUE(ckpt.ok());
  auto ops = loom::ops::make_reference_ops();
  const VisionConfig c = fixture_config();
  auto tower = Qwen3VisionTower::load(c, *ckpt, *ops);
  ASSERT_TRUE(tower.ok());
  const Tensor px = fx().get("one_image.pixel_values");  // 48 patches

  auto r1 = (*tower)->forward(px, Grids{{1, 6, 10}});
  EXPECT_EQ(r1.status().code(), StatusCode::kInvalidArgument) << r1.status().to_string();
  EXPECT_EQ((*tower)->forward(px, Grids{{1, 8, 5}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*tower)->forward(px, Grids{{0, 6, 8}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*tower)->forward(px, Grids{}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*tower)->forward(px.reshape({24, 2 * c.patch_dim()}), Grids{{1, 6, 8}}).status().code(),
            StatusCode::kInvalidArgument);

  // A config that disagrees with the weights' shapes (each kind of weight), a missing deepstack
  // merger, and a checkpoint without vision weights.
  VisionConfig bigger = c;
  bigger.intermediate_size = 64;
  auto bad = Qwen3VisionTower::load(bigger, *ckpt, *ops);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().to_string();
  VisionConfig more_pos = c;
  more_pos.num_position_embeddings = 64;
  EXPECT_EQ(Qwen3VisionTower::load(more_pos, *ckpt, *ops).status().code(), StatusCode::kInvalidArgument);
  VisionConfig three_stacks = c;
  three_stacks.deepstack_visual_indexes = {0, 1, 2};
  auto missing = Qwen3VisionTower::load(three_stacks, *ckpt, *ops);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().to_string();
  auto no_vision = Checkpoint::open(fx().dir() + "/goldens.safetensors");
  ASSERT_TRUE(no_vision.ok());
  EXPECT_EQ(Qwen3VisionTower::load(c, *no_vision, *ops).status().code(), StatusCode::kNotFound);
}

}  // namespace
