// probe_video / decode_video_frames against the ffmpeg CLI on tiny committed clips
// (tools/reference/make_video_fixtures.py): metadata must equal ffprobe's (frame count exact, fps exact
// as the rational avg_frame_rate, duration and pts within 1e-6 s: ffprobe prints 6 decimals) and pixels
// must equal the CLI's rgb24 output exactly (tolerance 0: same libswscale, same flags).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "media/video.h"
#include "video_test_util.h"

namespace loom::media {
namespace {

using testing::read_video_fixture;
using testing::video_goldens;

const nlohmann::json& clip(const std::string& file) {
  for (const auto& c : video_goldens()["clips"]) {
    if (c["file"] == file) return c;
  }
  ADD_FAILURE() << "no golden for " << file;
  static const nlohmann::json kEmpty = nlohmann::json::object();
  return kEmpty;
}

class VideoClip : public ::testing::TestWithParam<const char*> {};

TEST_P(VideoClip, ProbeMatchesFfprobe) {
  const auto& g = clip(GetParam());
  const auto bytes = read_video_fixture(GetParam());
  const auto info = probe_video(bytes);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_EQ(info->width, g["width"].get<int>());
  EXPECT_EQ(info->height, g["height"].get<int>());
  EXPECT_EQ(info->num_frames, g["num_frames"].get<int64_t>());
  EXPECT_DOUBLE_EQ(info->fps, g["fps_num"].get<double>() / g["fps_den"].get<double>());
  EXPECT_NEAR(info->duration_s, g["duration_s"].get<double>(), 1e-6);
}

TEST_P(VideoClip, SamplingMatchesTransformers) {
  const auto& g = clip(GetParam());
  const auto info = probe_video(read_video_fixture(GetParam()));
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  for (const auto& c : g["sampling"]) {
    FrameSampling s;
    s.fps = c["fps"].get<double>();
    s.min_frames = c["min_frames"].get<int64_t>();
    s.max_frames = c["max_frames"].get<int64_t>();
    s.temporal_patch_size = c["temporal_patch_size"].get<int32_t>();
    s.num_frames = c["num_frames"].get<int64_t>();
    const auto got = qwen_sample_frame_indices(*info, s);
    ASSERT_TRUE(c.contains("indices")) << c.dump();
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, c["indices"].get<std::vector<int64_t>>()) << c.dump();
  }
}

TEST_P(VideoClip, PixelsAndTimestampsMatchFfmpegCli) {
  const auto& g = clip(GetParam());
  const auto bytes = read_video_fixture(GetParam());
  const std::string name = GetParam();
  const auto want_rgb = read_video_fixture(name.substr(0, name.rfind('.')) + ".rgb");
  const auto idx = g["frames"].get<std::vector<int64_t>>();
  const auto pts = g["pts_s"].get<std::vector<double>>();
  const auto frames = decode_video_frames(bytes, idx);
  ASSERT_TRUE(frames.ok()) << frames.status().to_string();
  ASSERT_EQ(frames->size(), idx.size());
  const int w = g["width"].get<int>(), h = g["height"].get<int>();
  const size_t frame_bytes = static_cast<size_t>(w) * h * 3;
  ASSERT_EQ(want_rgb.size(), frame_bytes * idx.size());
  for (size_t k = 0; k < idx.size(); ++k) {
    const VideoFrame& f = (*frames)[k];
    EXPECT_EQ(f.index, idx[k]);
    EXPECT_NEAR(f.timestamp_s, pts[static_cast<size_t>(idx[k])] - pts[0], 1e-6) << "frame " << idx[k];
    ASSERT_EQ(f.image.width, w);
    ASSERT_EQ(f.image.height, h);
    ASSERT_EQ(f.image.rgb.size(), frame_bytes);
    int max_diff = 0;
    size_t mismatches = 0;
    for (size_t i = 0; i < frame_bytes; ++i) {
      const int d = std::abs(int(f.image.rgb[i]) - int(want_rgb[k * frame_bytes + i]));
      max_diff = std::max(max_diff, d);
      mismatches += d != 0;
    }
    EXPECT_EQ(max_diff, 0) << "frame " << idx[k] << ": " << mismatches << " of " << frame_bytes
                           << " bytes differ";
  }
}

TEST_P(VideoClip, OrderDuplicatesAndRange) {
  const auto& g = clip(GetParam());
  const auto bytes = read_video_fixture(GetParam());
  const int64_t n = g["num_frames"].get<int64_t>();
  const std::vector<int64_t> idx{n - 1, 0, n - 1};
  const auto frames = decode_video_frames(bytes, idx);
  ASSERT_TRUE(frames.ok()) << frames.status().to_string();
  ASSERT_EQ(frames->size(), 3u);
  EXPECT_EQ((*frames)[0].index, n - 1);
  EXPECT_EQ((*frames)[1].index, 0);
  EXPECT_EQ((*frames)[0].image.rgb, (*frames)[2].image.rgb);
  EXPECT_NE((*frames)[0].image.rgb, (*frames)[1].image.rgb);  // testsrc changes every frame

  const std::vector<int64_t> past{0, n};
  const auto bad = decode_video_frames(bytes, past);
  EXPECT_EQ(bad.status().code(), core::StatusCode::kOutOfRange);
  EXPECT_NE(bad.status().message().find("has " + std::to_string(n) + " frames"), std::string::npos)
      << bad.status().message();
  const std::vector<int64_t> negative{-1};
  EXPECT_EQ(decode_video_frames(bytes, negative).status().code(), core::StatusCode::kInvalidArgument);
  const auto none = decode_video_frames(bytes, std::span<const int64_t>{});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Every truncation gives a Status (never a crash); cutting off the tail must fail to yield the last frame.
TEST_P(VideoClip, TruncatedGivesStatus) {
  const auto& g = clip(GetParam());
  const auto bytes = read_video_fixture(GetParam());
  const int64_t n = g["num_frames"].get<int64_t>();
  const std::vector<int64_t> last{n - 1};
  for (size_t len : {size_t{1}, size_t{16}, size_t{200}, bytes.size() / 4, bytes.size() / 2,
                     bytes.size() * 3 / 4, bytes.size() - 64}) {
    const std::span<const uint8_t> cut(bytes.data(), len);
    const auto frames = decode_video_frames(cut, last);
    EXPECT_FALSE(frames.ok()) << "prefix of " << len << " bytes decoded the last frame";
    if (!frames.ok()) {
      const auto code = frames.status().code();
      EXPECT_TRUE(code == core::StatusCode::kCorruptData || code == core::StatusCode::kOutOfRange)
          << frames.status().to_string();
    }
    const auto info = probe_video(cut);  // may succeed on a prefix with fewer frames
    if (info.ok()) {
      EXPECT_LE(info->num_frames, n);
    }
  }
}

// Byte flips anywhere: a Status or frames, never a crash or a hang (run under ASan for memory errors).
TEST_P(VideoClip, FlippedBytesNeverCrash) {
  const auto bytes = read_video_fixture(GetParam());
  const std::vector<int64_t> all_some{0, 1, 2, 3, 4, 5, 6, 7};
  int errors = 0;
  for (size_t pos = 0; pos < bytes.size(); pos += std::max<size_t>(1, bytes.size() / 97)) {
    auto bad = bytes;
    bad[pos] ^= 0x5a;
    const auto frames = decode_video_frames(bad, all_some);
    if (!frames.ok()) {
      ++errors;
      EXPECT_FALSE(frames.status().message().empty());
    } else {
      EXPECT_EQ(frames->size(), all_some.size());
    }
    (void)probe_video(bad);
  }
  EXPECT_GT(errors, 0);  // some flip must be detected (headers at least)
}

TEST_P(VideoClip, LimitsExceeded) {
  const auto& g = clip(GetParam());
  const auto bytes = read_video_fixture(GetParam());
  const std::vector<int64_t> idx{g["num_frames"].get<int64_t>() - 1};  // past the 5-frame limit below
  VideoLimits small_bytes;
  small_bytes.max_bytes = static_cast<int64_t>(bytes.size()) - 1;
  EXPECT_EQ(probe_video(bytes, small_bytes).status().code(), core::StatusCode::kOutOfRange);
  EXPECT_EQ(decode_video_frames(bytes, idx, small_bytes).status().code(), core::StatusCode::kOutOfRange);
  VideoLimits small_frames;
  small_frames.max_pixels_per_frame = g["width"].get<int64_t>() * g["height"].get<int64_t>() - 1;
  EXPECT_EQ(probe_video(bytes, small_frames).status().code(), core::StatusCode::kOutOfRange);
  EXPECT_EQ(decode_video_frames(bytes, idx, small_frames).status().code(), core::StatusCode::kOutOfRange);
  VideoLimits few_frames;
  few_frames.max_frames_decoded = 5;
  const auto info = probe_video(bytes, few_frames);
  EXPECT_EQ(info.status().code(), core::StatusCode::kOutOfRange);
  EXPECT_NE(info.status().message().find("more than 5 frames"), std::string::npos) << info.status().message();
  EXPECT_EQ(decode_video_frames(bytes, idx, few_frames).status().code(), core::StatusCode::kOutOfRange);
  VideoLimits exact;
  exact.max_bytes = static_cast<int64_t>(bytes.size());
  exact.max_pixels_per_frame = g["width"].get<int64_t>() * g["height"].get<int64_t>();
  exact.max_frames_decoded = g["num_frames"].get<int64_t>();
  EXPECT_TRUE(probe_video(bytes, exact).ok());
  const auto at_limit = decode_video_frames(bytes, idx, exact);
  EXPECT_TRUE(at_limit.ok()) << at_limit.status().to_string();
}

INSTANTIATE_TEST_SUITE_P(Containers, VideoClip,
                         ::testing::Values("h264_bframes.mp4", "vp9.webm", "mpeg4_odd.mkv", "mjpeg_ntsc.mov",
                                           "h264_bt709_full.mkv"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

TEST(VideoDecode, EmptyAndGarbage) {
  EXPECT_EQ(probe_video({}).status().code(), core::StatusCode::kInvalidArgument);
  const std::vector<int64_t> idx{0};
  EXPECT_EQ(decode_video_frames({}, idx).status().code(), core::StatusCode::kInvalidArgument);
  std::vector<uint8_t> garbage(4096);
  for (size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  const auto g = probe_video(garbage);
  EXPECT_FALSE(g.ok());
  EXPECT_FALSE(decode_video_frames(garbage, idx).ok());
}

// A valid container without a video stream (a 0.1 s mono 8 kHz WAV) is kUnsupported, not corrupt.
TEST(VideoDecode, AudioOnlyIsUnsupported) {
  std::vector<uint8_t> wav;
  auto put32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) wav.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  auto put16 = [&](uint16_t v) {
    wav.push_back(static_cast<uint8_t>(v));
    wav.push_back(static_cast<uint8_t>(v >> 8));
  };
  auto tag = [&](const char* t) { wav.insert(wav.end(), t, t + 4); };
  const uint32_t samples = 800;
  tag("RIFF");
  put32(36 + samples * 2);
  tag("WAVE");
  tag("fmt ");
  put32(16);
  put16(1);  // PCM
  put16(1);  // mono
  put32(8000);
  put32(16000);
  put16(2);
  put16(16);
  tag("data");
  put32(samples * 2);
  for (uint32_t i = 0; i < samples; ++i) put16(static_cast<uint16_t>(i * 97));
  const auto info = probe_video(wav);
  EXPECT_EQ(info.status().code(), core::StatusCode::kUnsupported) << info.status().to_string();
  EXPECT_NE(info.status().message().find("no video stream"), std::string::npos);
}

}  // namespace
}  // namespace loom::media
