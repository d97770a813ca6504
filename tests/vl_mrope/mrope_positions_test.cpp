// M-RoPE position ids vs transformers 5.24's Qwen2-VL / Qwen2.5-VL get_rope_index and the decode
// positions of compute_3d_position_ids. Goldens: tests/fixtures/vl_mrope/goldens.json from
// tools/reference/make_mrope_goldens.py. Positions are integers: compared exactly (tolerance 0).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/check.h"
#include "models/qwen_vl/mrope_positions.h"

namespace qv = loom::models::qwen_vl;
using loom::core::StatusCode;

namespace {

constexpr int32_t kVisionStart = 151652, kVisionEnd = 151653, kImagePad = 151655, kVideoPad = 151656;

nlohmann::json load_goldens() {
  const std::string path = std::string(LOOM_FIXTURES_DIR) + "/vl_mrope/goldens.json";
  std::ifstream f(path);
  LOOM_CHECK(f.good()) << "cannot open " << path;
  return nlohmann::json::parse(f);
}

std::vector<qv::VisionGrid> grids_of(const nlohmann::json& j) {
  std::vector<qv::VisionGrid> out;
  for (const auto& g : j)
    out.push_back({g.at(0).get<int64_t>(), g.at(1).get<int64_t>(), g.at(2).get<int64_t>()});
  return out;
}

qv::MropeConfig qwen25_config() {
  return {.image_token_id = kImagePad,
          .video_token_id = kVideoPad,
          .vision_start_token_id = kVisionStart,
          .spatial_merge_size = 2,
          .tokens_per_second = 2};
}

// push_text: n text tokens (ids 100..100+n-1); push_item: <vision_start> pad x count <vision_end>.
void push_text(std::vector<int32_t>& ids, int n) {
  for (int i = 0; i < n; ++i) ids.push_back(100 + i);
}
void push_item(std::vector<int32_t>& ids, int32_t pad, int64_t count) {
  ids.push_back(kVisionStart);
  ids.insert(ids.end(), count, pad);
  ids.push_back(kVisionEnd);
}

}  // namespace

TEST(VlMrope, MatchesTransformersGoldens) {
  const auto doc = load_goldens();
  const auto& cases = doc.at("cases");
  ASSERT_GE(cases.size(), 20u);
  bool saw_video_scaling = false, saw_mixed = false;
  for (const auto& c : cases) {
    const std::string name = c.at("name");
    SCOPED_TRACE(name);
    const auto& jc = c.at("config");
    const qv::MropeConfig cfg{.image_token_id = jc.at("image_token_id"),
                              .video_token_id = jc.at("video_token_id"),
                              .vision_start_token_id = jc.at("vision_start_token_id"),
                              .spatial_merge_size = jc.at("spatial_merge_size"),
                              .tokens_per_second = jc.at("tokens_per_second").get<double>()};
    const auto ids = c.at("input_ids").get<std::vector<int32_t>>();
    const auto images = grids_of(c.at("image_grid_thw"));
    const auto videos = grids_of(c.at("video_grid_thw"));
    const auto spg = c.at("second_per_grid_ts").get<std::vector<double>>();
    saw_video_scaling |= !videos.empty() && cfg.tokens_per_second > 0;
    saw_mixed |= !videos.empty() && !images.empty();

    auto got = qv::mrope_positions(ids, images, videos, spg, cfg);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const auto& want = c.at("positions");
    EXPECT_EQ(got->t, want.at(0).get<std::vector<int32_t>>());
    EXPECT_EQ(got->h, want.at(1).get<std::vector<int32_t>>());
    EXPECT_EQ(got->w, want.at(2).get<std::vector<int32_t>>());
    EXPECT_EQ(got->rope_delta, c.at("rope_delta").get<int64_t>());

    const auto& dec = c.at("decode");
    auto d = qv::mrope_decode_positions(dec.at("cache_length"), dec.at("count"), got->rope_delta);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const auto& dwant = dec.at("positions");
    EXPECT_EQ(d->t, dwant.at(0).get<std::vector<int32_t>>());
    EXPECT_EQ(d->h, dwant.at(1).get<std::vector<int32_t>>());
    EXPECT_EQ(d->w, dwant.at(2).get<std::vector<int32_t>>());
  }
  EXPECT_TRUE(saw_video_scaling);
  EXPECT_TRUE(saw_mixed);
}

// A hand-checked case, independent of the goldens: 2 text, image 1x4x6 (merged 2x3), 1 text.
TEST(VlMrope, SmallImageByHand) {
  std::vector<int32_t> ids = {1, 2, kImagePad, kImagePad, kImagePad, kImagePad, kImagePad, kImagePad, 3};
  const std::vector<qv::VisionGrid> images = {{1, 4, 6}};
  auto got = qv::mrope_positions(ids, images, {}, {}, qwen25_config());
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->t, (std::vector<int32_t>{0, 1, 2, 2, 2, 2, 2, 2, 5}));
  EXPECT_EQ(got->h, (std::vector<int32_t>{0, 1, 2, 2, 2, 3, 3, 3, 5}));
  EXPECT_EQ(got->w, (std::vector<int32_t>{0, 1, 2, 3, 4, 2, 3, 4, 5}));
  EXPECT_EQ(got->rope_delta, 5 + 1 - 9);
}

// Qwen2.5-VL video: temporal row spaced by tokens_per_second * second_per_grid_t (float32, truncated);
// the text after it resumes at start + max(H, W), as in transformers 5.24.
TEST(VlMrope, VideoTemporalScalingByHand) {
  std::vector<int32_t> ids = {7};
  ids.insert(ids.end(), 3 * 1 * 1, kVideoPad);  // grid 3x2x2 -> merged 3x1x1
  ids.push_back(8);
  const std::vector<qv::VisionGrid> videos = {{3, 2, 2}};
  auto cfg = qwen25_config();
  cfg.tokens_per_second = 25;
  const std::vector<double> spg = {0.5};  // interval 12.5 -> 0, 12, 25
  auto got = qv::mrope_positions(ids, {}, videos, spg, cfg);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->t, (std::vector<int32_t>{0, 1, 13, 26, 2}));
  EXPECT_EQ(got->h, (std::vector<int32_t>{0, 1, 1, 1, 2}));
  EXPECT_EQ(got->w, (std::vector<int32_t>{0, 1, 1, 1, 2}));
  EXPECT_EQ(got->rope_delta, 26 + 1 - 5);
  // Qwen2-VL (tokens_per_second 0): no scaling, second_per_grid_ts ignored.
  cfg.tokens_per_second = 0;
  got = qv::mrope_positions(ids, {}, videos, spg, cfg);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(got->t, (std::vector<int32_t>{0, 1, 2, 3, 2}));
}

TEST(VlMrope, TextOnlyIsArange) {
  std::vector<int32_t> ids;
  push_text(ids, 97);
  auto got = qv::mrope_positions(ids, {}, {}, {}, qwen25_config());
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  for (int i = 0; i < 97; ++i) {
    ASSERT_EQ(got->t[i], i);
    ASSERT_EQ(got->h[i], i);
    ASSERT_EQ(got->w[i], i);
  }
  EXPECT_EQ(got->rope_delta, 0);
}

TEST(VlMrope, DecodePositions) {
  auto d = qv::mrope_decode_positions(10, 4, -3);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->t, (std::vector<int32_t>{7, 8, 9, 10}));
  EXPECT_EQ(d->h, d->t);
  EXPECT_EQ(d->w, d->t);
  d = qv::mrope_decode_positions(5, 0, 2);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->t.empty());
  EXPECT_EQ(qv::mrope_decode_positions(-1, 2, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::mrope_decode_positions(0, -1, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::mrope_decode_positions(2, 1, -5).status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(qv::mrope_decode_positions(std::numeric_limits<int32_t>::max(), 2, 0).status().code(),
            StatusCode::kOutOfRange);
}

TEST(VlMrope, ErrorsOnMismatchedCounts) {
  const auto cfg = qwen25_config();
  const std::vector<qv::VisionGrid> one = {{1, 4, 4}};  // 4 tokens
  const std::vector<qv::VisionGrid> two = {{1, 4, 4}, {1, 2, 2}};
  std::vector<int32_t> ids;
  push_text(ids, 3);
  push_item(ids, kImagePad, 4);
  push_text(ids, 2);
  push_item(ids, kImagePad, 1);
  auto expect_error = [](const auto& r, const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
  };
  // Sanity: the matching call works.
  ASSERT_TRUE(qv::mrope_positions(ids, two, {}, {}, cfg).ok());
  // More image runs than grids.
  expect_error(qv::mrope_positions(ids, one, {}, {}, cfg), "only 1 image grids");
  // More grids than runs.
  const std::vector<qv::VisionGrid> three = {{1, 4, 4}, {1, 2, 2}, {1, 2, 2}};
  expect_error(qv::mrope_positions(ids, three, {}, {}, cfg), "3 image and 0 video grids given");
  // An extra video grid without a video run (modalities are matched separately).
  expect_error(qv::mrope_positions(ids, two, one, {}, cfg), "2 image and 1 video grids given");
  // Run length != grid tokens.
  const std::vector<qv::VisionGrid> wrong = {{1, 4, 4}, {1, 4, 2}};
  expect_error(qv::mrope_positions(ids, wrong, {}, {}, cfg), "needs 2");
  // Two images with nothing between form one run.
  std::vector<int32_t> adjacent(5, kImagePad);
  expect_error(qv::mrope_positions(adjacent, two, {}, {}, cfg), "needs 4");
  // A grid far larger than the run (no overflow on absurd sides).
  const std::vector<qv::VisionGrid> huge = {{1LL << 40, 1LL << 40, 1LL << 40}, {1, 2, 2}};
  expect_error(qv::mrope_positions(ids, huge, {}, {}, cfg), "needs more than 2147483647");
  // Video runs without video grids.
  std::vector<int32_t> vids;
  push_item(vids, kVideoPad, 2);
  expect_error(qv::mrope_positions(vids, {}, {}, {}, cfg), "only 0 video grids");
}

TEST(VlMrope, ErrorsOnBadArguments) {
  auto cfg = qwen25_config();
  std::vector<int32_t> ids;
  push_text(ids, 2);
  push_item(ids, kVideoPad, 2);
  const std::vector<qv::VisionGrid> video = {{2, 2, 2}};
  ASSERT_TRUE(qv::mrope_positions(ids, {}, video, std::vector<double>{1.0}, cfg).ok());
  auto code = [](const auto& r) { return r.status().code(); };
  EXPECT_EQ(code(qv::mrope_positions({}, {}, {}, {}, cfg)), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, video, std::vector<double>{1.0, 2.0}, cfg)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, video, std::vector<double>{-1.0}, cfg)),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, video, std::vector<double>{std::nan("")}, cfg)),
            StatusCode::kInvalidArgument);
  const std::vector<qv::VisionGrid> odd = {{2, 3, 2}};
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, odd, {}, cfg)), StatusCode::kInvalidArgument);
  const std::vector<qv::VisionGrid> zero = {{0, 2, 2}};
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, zero, {}, cfg)), StatusCode::kInvalidArgument);
  auto bad = cfg;
  bad.spatial_merge_size = 0;
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, video, {}, bad)), StatusCode::kInvalidArgument);
  bad = cfg;
  bad.tokens_per_second = -2;
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, video, {}, bad)), StatusCode::kInvalidArgument);
  // Temporal positions past int32: a huge interval.
  EXPECT_EQ(code(qv::mrope_positions(ids, {}, video, std::vector<double>{3e9}, cfg)),
            StatusCode::kOutOfRange);
}
