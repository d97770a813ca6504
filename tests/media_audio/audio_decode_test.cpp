// loom::media::decode_audio / probe_audio against the references in tests/fixtures/media_audio (made by
// tools/reference/make_audio_fixtures.py): the ffmpeg CLI's decode with the same settings (every clip) and
// transformers' load_audio (soundfile + soxr_hq, lossless clips); plus downmix, lengths and every error
// class.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "media/audio.h"

namespace loom::media {
namespace {

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<uint8_t> fixture(const std::string& name) {
  return read_file(std::string(LOOM_FIXTURES_DIR) + "/media_audio/" + name);
}

std::vector<float> read_f32(const std::string& name) {
  const std::vector<uint8_t> b = fixture(name);
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);  // little-endian host assumed (x86-64, aarch64)
  return v;
}

const nlohmann::json& goldens() {
  static const nlohmann::json j = [] {
    const std::vector<uint8_t> b = fixture("goldens.json");
    return nlohmann::json::parse(b.begin(), b.end());
  }();
  return j;
}

// Max |a - b| over the common prefix.
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    m = std::max(m, static_cast<double>(std::fabs(a[i] - b[i])));
  }
  return m;
}

// A 16-bit PCM WAV in memory: `frames` interleaved samples per channel from `sample(frame, channel)`.
template <typename F>
std::vector<uint8_t> make_wav(int rate, int channels, int frames, F sample) {
  std::vector<uint8_t> w;
  auto u32 = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) w.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  auto u16 = [&](uint16_t v) {
    w.push_back(static_cast<uint8_t>(v));
    w.push_back(static_cast<uint8_t>(v >> 8));
  };
  const uint32_t data = static_cast<uint32_t>(frames * channels * 2);
  w.insert(w.end(), {'R', 'I', 'F', 'F'});
  u32(36 + data);
  w.insert(w.end(), {'W', 'A', 'V', 'E', 'f', 'm', 't', ' '});
  u32(16);
  u16(1);
  u16(static_cast<uint16_t>(channels));
  u32(static_cast<uint32_t>(rate));
  u32(static_cast<uint32_t>(rate * channels * 2));
  u16(static_cast<uint16_t>(channels * 2));
  u16(16);
  w.insert(w.end(), {'d', 'a', 't', 'a'});
  u32(data);
  for (int f = 0; f < frames; ++f) {
    for (int c = 0; c < channels; ++c) u16(static_cast<uint16_t>(static_cast<int16_t>(sample(f, c))));
  }
  return w;
}

// Ours vs the ffmpeg CLI (same library, same soxr settings, same channel mean). Both run libswresample's
// soxr engine in float; the CLI splits the work over three filters (aformat, pan, aresample) where we use
// one SwrContext, so float rounding may differ in the last bits: 1e-6 absolute on signals of amplitude <= 1.
constexpr double kCliTolerance = 1e-6;
// Ours vs transformers (soundfile + python-soxr soxr_hq) on lossless clips: the same integer->float scaling,
// float mean and the soxr library at the same quality; measured 0 (bit-identical); 1e-6 allows for a
// different libsoxr build (SIMD paths) without hiding a wrong filter (other settings differ by >= 2e-3).
constexpr double kTransformersTolerance = 1e-6;

TEST(AudioDecode, MatchesFfmpegCliAndTransformers) {
  ASSERT_TRUE(audio_supported());
  for (const auto& [name, g] : goldens()["clips"].items()) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> bytes = fixture(g["file"].get<std::string>());
    auto pcm = decode_audio(bytes, 16000);
    ASSERT_TRUE(pcm.ok()) << pcm.status().to_string();
    const std::vector<float>& y = pcm.value();
    EXPECT_EQ(static_cast<int64_t>(y.size()), g["expected_samples"].get<int64_t>());
    const std::vector<float> cli = read_f32(name + ".cli.f32");
    // The CLI does not pad to ceil(n * 16000 / rate): it may end one sample short.
    EXPECT_LE(std::llabs(static_cast<long long>(cli.size()) - static_cast<long long>(y.size())), 1);
    const double d_cli = max_abs_diff(y, cli);
    EXPECT_LE(d_cli, kCliTolerance);
    for (float v : y) ASSERT_TRUE(std::isfinite(v));
    if (g.contains("transformers_ref")) {
      const std::vector<float> tf = read_f32(g["transformers_ref"].get<std::string>());
      EXPECT_EQ(y.size(), tf.size());
      EXPECT_LE(max_abs_diff(y, tf), kTransformersTolerance);
    }
    std::printf("%-18s %zu samples, max |ours - cli| = %.3g\n", name.c_str(), y.size(), d_cli);
  }
}

TEST(AudioDecode, ProbeMatchesFfprobe) {
  for (const auto& [name, g] : goldens()["clips"].items()) {
    SCOPED_TRACE(name);
    auto info = probe_audio(fixture(g["file"].get<std::string>()));
    ASSERT_TRUE(info.ok()) << info.status().to_string();
    EXPECT_EQ(info.value().sample_rate, g["sample_rate"].get<int>());
    EXPECT_EQ(info.value().channels, g["channels"].get<int>());
    EXPECT_EQ(info.value().codec, g["codec"].get<std::string>());
    EXPECT_NEAR(info.value().duration_s, g["duration_s"].get<double>(), 1e-5);
  }
}

TEST(AudioDecode, DownmixIsTheChannelMean) {
  // 3 channels at 16 kHz (no resampling): each output sample is the mean of the three, exactly.
  const auto wav =
      make_wav(16000, 3, 1000, [](int f, int c) { return (f * 37 + c * 11000) % 30000 - 15000; });
  auto pcm = decode_audio(wav, 16000);
  ASSERT_TRUE(pcm.ok()) << pcm.status().to_string();
  ASSERT_EQ(pcm.value().size(), 1000u);
  for (int f = 0; f < 1000; ++f) {
    float sum = 0.0f;
    for (int c = 0; c < 3; ++c) sum += static_cast<float>((f * 37 + c * 11000) % 30000 - 15000) / 32768.0f;
    ASSERT_NEAR(pcm.value()[f], sum / 3.0f, 1e-7) << "frame " << f;
  }
  // Stereo with opposite channels cancels (swr's default matrix would not average).
  const auto anti = make_wav(16000, 2, 500, [](int f, int c) { return c == 0 ? f * 20 : -f * 20; });
  auto z = decode_audio(anti, 16000);
  ASSERT_TRUE(z.ok());
  for (float v : z.value()) ASSERT_EQ(v, 0.0f);
}

TEST(AudioDecode, LengthIsCeilOfRatio) {
  // 7 samples at 44.1 kHz -> ceil(7 * 16000 / 44100) = 3; 44101 -> 16001; 11025 at 8k target -> 2000.
  const auto sine = [](int f, int) { return static_cast<int>(8000 * std::sin(0.05 * f)); };
  struct Case {
    int rate, frames, target;
    size_t want;
  };
  for (const Case& c :
       {Case{44100, 7, 16000, 3}, Case{44100, 44101, 16000, 16001}, Case{22050, 11025, 8000, 4000},
        Case{8000, 1, 16000, 2}, Case{48000, 4800, 24000, 2400}}) {
    auto pcm = decode_audio(make_wav(c.rate, 1, c.frames, sine), c.target);
    ASSERT_TRUE(pcm.ok()) << pcm.status().to_string();
    EXPECT_EQ(pcm.value().size(), c.want) << c.rate << " " << c.frames;
  }
}

void expect_code(const core::Status& s, core::StatusCode code, const std::string& needle) {
  EXPECT_EQ(s.code(), code) << s.to_string();
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.to_string();
}

TEST(AudioDecode, Errors) {
  using core::StatusCode;
  expect_code(decode_audio({}).status(), StatusCode::kInvalidArgument, "empty");
  expect_code(probe_audio({}).status(), StatusCode::kInvalidArgument, "empty");

  std::mt19937 rng(7);
  std::vector<uint8_t> noise(4096);
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  expect_code(decode_audio(noise).status(), StatusCode::kCorruptData, "audio");

  const std::vector<uint8_t> png = read_file(std::string(LOOM_FIXTURES_DIR) + "/media/png_gray.png");
  expect_code(decode_audio(png).status(), StatusCode::kCorruptData, "not an audio file");
  const std::vector<uint8_t> video =
      read_file(std::string(LOOM_FIXTURES_DIR) + "/media_video/h264_bframes.mp4");
  expect_code(decode_audio(video).status(), StatusCode::kCorruptData, "no audio stream");

  expect_code(decode_audio(fixture("zero.wav")).status(), StatusCode::kInvalidArgument, "no samples");
  expect_code(decode_audio(fixture("pcm16_mono_8k.wav"), 0).status(), StatusCode::kInvalidArgument, "rate");

  // Over the limits: bytes before demuxing; duration from the header (probe and decode).
  AudioLimits small;
  small.max_bytes = 1000;
  expect_code(decode_audio(fixture("pcm16_mono_8k.wav"), 16000, small).status(), StatusCode::kOutOfRange,
              "bytes");
  AudioLimits short_limit;
  short_limit.max_duration_s = 0.5;
  for (const char* f :
       {"pcm16_mono_8k.wav", "opus_stereo_48k.opus", "aac_mono_44k.m4a", "mp3_stereo_44k.mp3"}) {
    SCOPED_TRACE(f);
    expect_code(probe_audio(fixture(f), short_limit).status(), StatusCode::kOutOfRange, "limit");
    expect_code(decode_audio(fixture(f), 16000, short_limit).status(), StatusCode::kOutOfRange, "limit");
  }
  // A header that understates the length is caught by the decoded-sample count: the mp3's Info frame is
  // edited to declare 5 frames (0.13 s) while 1 s of frames follows.
  std::vector<uint8_t> lie = fixture("mp3_stereo_44k.mp3");
  const std::string tag = "Info";
  const auto it = std::search(lie.begin(), lie.end(), tag.begin(), tag.end());
  ASSERT_NE(it, lie.end());
  const size_t at = static_cast<size_t>(it - lie.begin()) + 8;  // tag, 4 flag bytes, then the frame count
  ASSERT_NE(lie[at - 1] & 1, 0);                                // the frame-count field is present
  lie[at] = lie[at + 1] = lie[at + 2] = 0;
  lie[at + 3] = 5;
  auto info = probe_audio(lie, short_limit);
  ASSERT_TRUE(info.ok()) << info.status().to_string();
  EXPECT_LT(info.value().duration_s, 0.2);
  expect_code(decode_audio(lie, 16000, short_limit).status(), StatusCode::kOutOfRange, "limit");
}

TEST(AudioDecode, TruncatedFilesAreCorrupt) {
  // Containers that declare their length: cut in half, they must fail rather than decode half the audio.
  for (const char* f : {"pcm16_mono_8k.wav", "pcm24_stereo_16k.wav", "f32_mono_22k.wav",
                        "flac_stereo_22k.flac", "aac_mono_44k.m4a", "mp3_stereo_44k.mp3"}) {
    SCOPED_TRACE(f);
    std::vector<uint8_t> b = fixture(f);
    b.resize(b.size() / 2);
    const core::Status s = decode_audio(b).status();
    std::printf("%-22s cut in half: %s\n", f, s.to_string().c_str());
    EXPECT_EQ(s.code(), core::StatusCode::kCorruptData) << s.to_string();
  }
}

TEST(AudioDecode, EveryPrefixAndFlipIsHandled) {
  // Any prefix or a flipped byte gives a Status or finite samples, never a crash (also run under ASan).
  for (const auto& [name, g] : goldens()["clips"].items()) {
    SCOPED_TRACE(name);
    const std::vector<uint8_t> full = fixture(g["file"].get<std::string>());
    const size_t step = std::max<size_t>(1, full.size() / 40);
    for (size_t n = 0; n < full.size(); n += step) {
      std::vector<uint8_t> b(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
      auto r = decode_audio(b);
      if (r.ok()) {
        for (float v : r.value()) ASSERT_TRUE(std::isfinite(v));
      }
      std::vector<uint8_t> flipped = full;
      flipped[n] ^= 0x5A;
      auto r2 = decode_audio(flipped);
      if (r2.ok()) {
        for (float v : r2.value()) ASSERT_TRUE(std::isfinite(v));
      }
    }
  }
}

}  // namespace
}  // namespace loom::media
