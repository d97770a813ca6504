// qwen_sample_frame_indices against transformers 5.24's Qwen2VLVideoProcessor.sample_frames, run by
// tools/reference/make_video_fixtures.py on synthetic metadata (edge cases: videos shorter than a
// temporal patch, NTSC rates, min/max_frames binding, explicit num_frames). Exact: indices are integers;
// a reference error (ValueError / ZeroDivisionError) must be an error here too.
#include <gtest/gtest.h>

#include "media/video.h"
#include "video_test_util.h"

namespace loom::media {
namespace {

FrameSampling sampling_from(const nlohmann::json& c) {
  FrameSampling s;
  s.fps = c["fps"].get<double>();
  s.min_frames = c["min_frames"].get<int64_t>();
  s.max_frames = c["max_frames"].get<int64_t>();
  s.temporal_patch_size = c["temporal_patch_size"].get<int32_t>();
  s.num_frames = c["num_frames"].get<int64_t>();
  return s;
}

// transformers' indices minus any at or past the end (see video_sampling.cpp: it can emit one).
std::vector<int64_t> in_range(std::vector<int64_t> idx, int64_t total) {
  std::erase_if(idx, [&](int64_t i) { return i >= total; });
  return idx;
}

TEST(QwenSampling, MatchesTransformersOnSyntheticMetadata) {
  const auto& cases = testing::video_goldens()["sampling"];
  ASSERT_GT(cases.size(), 50u);
  int dropped = 0;
  for (const auto& c : cases) {
    VideoInfo info;
    info.num_frames = c["total_num_frames"].get<int64_t>();
    info.fps = c["video_fps"].get<double>();
    const auto got = qwen_sample_frame_indices(info, sampling_from(c));
    SCOPED_TRACE(c.dump());
    if (c.contains("error")) {
      EXPECT_FALSE(got.ok());
      if (c["error"] == "ZeroDivisionError") {
        EXPECT_EQ(got.status().code(), core::StatusCode::kInvalidArgument);
      } else {
        EXPECT_EQ(c["error"], "ValueError");
        EXPECT_EQ(got.status().code(), core::StatusCode::kOutOfRange);
      }
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, in_range(c["indices"].get<std::vector<int64_t>>(), info.num_frames));
    dropped += got->size() != c["indices"].size();
  }
  EXPECT_GT(dropped, 0);  // the 359 @ 29.97 case below exercises the drop
}

TEST(QwenSampling, DropsTheIndexPastTheEnd) {
  VideoInfo info;
  info.num_frames = 359;
  info.fps = 29.97;
  const auto got = qwen_sample_frame_indices(info, FrameSampling{});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), 22u);  // transformers: 23 indices, the 23rd being 359
  EXPECT_EQ(got->back(), 342);
}

TEST(QwenSampling, CountIsAMultipleOfTemporalPatch) {
  for (int64_t total = 2; total < 400; total += 7) {
    for (double vfps : {23.976, 25.0, 29.97, 60.0}) {
      VideoInfo info;
      info.num_frames = total;
      info.fps = vfps;
      const auto got = qwen_sample_frame_indices(info, FrameSampling{});
      ASSERT_TRUE(got.ok()) << total << " " << got.status().to_string();
      EXPECT_EQ(got->size() % 2, 0u) << total << " @ " << vfps;  // includes 359 @ 29.97
      for (size_t i = 1; i < got->size(); ++i) EXPECT_LT((*got)[i - 1], (*got)[i]);
      EXPECT_LT(got->back(), total);
    }
  }
}

TEST(QwenSampling, RejectsBadSettings) {
  VideoInfo info;
  info.num_frames = 100;
  info.fps = 30.0;
  FrameSampling s;
  s.fps = 0.0;
  EXPECT_EQ(qwen_sample_frame_indices(info, s).status().code(), core::StatusCode::kInvalidArgument);
  s = FrameSampling{};
  s.temporal_patch_size = 0;
  EXPECT_EQ(qwen_sample_frame_indices(info, s).status().code(), core::StatusCode::kInvalidArgument);
  info.fps = 0.0;  // fps mode needs the video's rate; num_frames mode does not
  EXPECT_EQ(qwen_sample_frame_indices(info, FrameSampling{}).status().code(),
            core::StatusCode::kInvalidArgument);
  s = FrameSampling{};
  s.num_frames = 4;
  const auto got = qwen_sample_frame_indices(info, s);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, (std::vector<int64_t>{0, 25, 50, 75}));
  info.num_frames = 0;
  EXPECT_FALSE(qwen_sample_frame_indices(info, s).ok());
}

TEST(QwenSampling, TimestampsAreIndexOverFps) {
  VideoInfo info;
  info.fps = 4.0;
  const std::vector<int64_t> idx{0, 2, 7};
  EXPECT_EQ(frame_timestamps(info, idx), (std::vector<double>{0.0, 0.5, 1.75}));
}

}  // namespace
}  // namespace loom::media
