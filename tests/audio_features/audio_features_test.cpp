// Whisper log-mel features and Qwen2.5-Omni audio token counts vs transformers 5.24
// (goldens: tools/reference/make_audio_feature_goldens.py -> tests/fixtures/audio_features/).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "models/checkpoint/safetensors.h"
#include "models/qwen_omni/audio_features.h"

namespace qo = loom::models::qwen_omni;

namespace {

const std::string kDir = std::string(LOOM_FIXTURES_DIR) + "/audio_features";
constexpr int kSr = 16000;

// Same integer recurrence and double math as the Python generator, cast to float32 at the end.
std::vector<float> make_signal(const std::string& kind, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n));
  const double two_pi = 2 * std::numbers::pi;
  uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int64_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / kSr;
    double v = 0.0;
    if (kind == "sine") {
      v = 0.5 * std::sin(two_pi * 440.0 * t) + 0.25 * std::sin(two_pi * 3000.0 * t);
    } else if (kind == "chirp") {
      v = 0.8 * std::sin(two_pi * (100.0 * t + 100.0 * t * t));
    } else if (kind == "noise") {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      v = 0.3 * (static_cast<double>(s >> 11) * 0x1p-53 * 2.0 - 1.0);
    } else if (kind == "silence") {
      v = 0.0;
    } else if (kind == "clipped") {
      v = std::clamp(1.5 * std::sin(two_pi * 220.0 * t), -1.0, 1.0);
    } else if (kind == "tail_click") {
      v = i >= n - 50 ? 1.0 : 1e-3 * std::sin(two_pi * 1000.0 * t);
    } else {
      LOOM_CHECK(false) << "unknown signal " << kind;
    }
    x[static_cast<size_t>(i)] = static_cast<float>(v);
  }
  return x;
}

std::shared_ptr<const loom::models::SafetensorsFile> goldens() {
  auto f = loom::models::SafetensorsFile::open(kDir + "/goldens.safetensors");
  LOOM_CHECK(f.ok()) << f.status().to_string();
  return *f;
}

// Golden [128, w] slice vs our features' frames [start, start + w). Returns the max abs error.
double compare_slice(const loom::models::SafetensorsFile& f, const std::string& name, const qo::LogMel& got,
                     int64_t start) {
  const auto* e = f.find(name);
  LOOM_CHECK(e != nullptr) << "missing golden " << name;
  auto t = f.tensor(*e);
  LOOM_CHECK(t.ok()) << t.status().to_string();
  const auto shape = t->shape();
  EXPECT_EQ(shape.size(), 2u);
  EXPECT_EQ(shape[0], got.n_mels);
  const int64_t w = shape[1];
  EXPECT_LE(start + w, got.frames);
  const auto* want = static_cast<const float*>(t->data());
  double max_abs = 0.0;
  for (int64_t m = 0; m < got.n_mels; ++m)
    for (int64_t j = 0; j < w; ++j) {
      const float g = got.data[static_cast<size_t>(m * got.frames + start + j)];
      EXPECT_FALSE(std::isnan(g));
      max_abs = std::max(max_abs, std::fabs(static_cast<double>(g) - want[m * w + j]));
    }
  return max_abs;
}

}  // namespace

TEST(AudioFeatures, LoadsQwenOmniConfig) {
  auto cfg = qo::load_whisper_feature_config(kDir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  EXPECT_EQ(cfg->feature_size, 128);
  EXPECT_EQ(cfg->sampling_rate, 16000);
  EXPECT_EQ(cfg->hop_length, 160);
  EXPECT_EQ(cfg->n_fft, 400);
  EXPECT_EQ(cfg->chunk_length, 300);
  EXPECT_EQ(cfg->n_samples(), 4800000);
  EXPECT_EQ(cfg->max_frames(), 30000);
}

TEST(AudioFeatures, ConfigParsingAndErrors) {
  // Absent keys take WhisperFeatureExtractor's class defaults.
  auto d = qo::parse_whisper_feature_config("{}", "t");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->feature_size, 80);
  EXPECT_EQ(d->chunk_length, 30);
  EXPECT_EQ(d->n_fft, 400);
  auto dither = qo::parse_whisper_feature_config(R"({"dither": 0.0001})", "t");
  EXPECT_EQ(dither.status().code(), loom::core::StatusCode::kUnsupported);
  auto bad_json = qo::parse_whisper_feature_config("{", "t");
  EXPECT_EQ(bad_json.status().code(), loom::core::StatusCode::kInvalidArgument);
  auto bad_type = qo::parse_whisper_feature_config(R"({"hop_length": "160"})", "t");
  EXPECT_EQ(bad_type.status().code(), loom::core::StatusCode::kInvalidArgument);
  auto zero_hop = qo::parse_whisper_feature_config(R"({"hop_length": 0})", "t");
  EXPECT_EQ(zero_hop.status().code(), loom::core::StatusCode::kInvalidArgument);
  auto prime_fft = qo::parse_whisper_feature_config(R"({"n_fft": 422})", "t");  // 2 * 211
  EXPECT_EQ(prime_fft.status().code(), loom::core::StatusCode::kUnsupported);
  auto odd_fft = qo::parse_whisper_feature_config(R"({"n_fft": 375})", "t");
  EXPECT_EQ(odd_fft.status().code(), loom::core::StatusCode::kUnsupported);
  auto other =
      qo::parse_whisper_feature_config(R"({"feature_extractor_type": "SeamlessM4TFeatureExtractor"})", "t");
  EXPECT_EQ(other.status().code(), loom::core::StatusCode::kUnsupported);

  // processor_config.json's "feature_extractor" wins over preprocessor_config.json.
  const auto dir = std::filesystem::path(LOOM_BINARY_DIR) / "audio_features_cfg";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "processor_config.json")
      << R"({"feature_extractor": {"feature_size": 64, "chunk_length": 10}})";
  std::ofstream(dir / "preprocessor_config.json") << R"({"feature_size": 128})";
  auto nested = qo::load_whisper_feature_config(dir.string());
  ASSERT_TRUE(nested.ok()) << nested.status().to_string();
  EXPECT_EQ(nested->feature_size, 64);
  EXPECT_EQ(nested->chunk_length, 10);
  auto missing = qo::load_whisper_feature_config((dir / "nope").string());
  EXPECT_EQ(missing.status().code(), loom::core::StatusCode::kNotFound);
}

// Token formula by hand (Python floor division for tiny inputs).
TEST(AudioFeatures, TokenFormula) {
  EXPECT_EQ(qo::audio_token_count(0), 0);
  EXPECT_EQ(qo::audio_token_count(1), 0);
  EXPECT_EQ(qo::audio_token_count(2), 0);
  EXPECT_EQ(qo::audio_token_count(3), 1);
  EXPECT_EQ(qo::audio_token_count(4), 1);
  EXPECT_EQ(qo::audio_token_count(5), 1);
  EXPECT_EQ(qo::audio_token_count(7), 2);
  EXPECT_EQ(qo::audio_token_count(100), 25);
  EXPECT_EQ(qo::audio_token_count(3000), 750);
  EXPECT_EQ(qo::audio_token_count(30000), 7500);
}

// Valid frames (the extractor's attention mask sum) and token counts for 1 sample .. 10 min,
// exact (integers).
TEST(AudioFeatures, TokenCountsMatchTransformers) {
  auto cfg = qo::load_whisper_feature_config(kDir);
  ASSERT_TRUE(cfg.ok());
  std::ifstream in(kDir + "/token_counts.json");
  ASSERT_TRUE(in.good());
  const auto rows = nlohmann::json::parse(in);
  ASSERT_GE(rows.size(), 30u);
  for (const auto& r : rows) {
    const int64_t n = r["samples"];
    SCOPED_TRACE(n);
    EXPECT_EQ(qo::valid_mel_frames(n, *cfg), r["valid_frames"].get<int64_t>());
    EXPECT_EQ(qo::audio_token_count(qo::valid_mel_frames(n, *cfg)), r["tokens"].get<int64_t>());
  }
}

// Every golden case. Tolerance: max abs 1e-4 on the normalised log-mel ((log10 + 4) / 4). We compute
// the STFT and mel products in double; transformers' torch path runs them in float32, whose rounding
// in low-energy bins (up to 8 decades below the loudest, the clamp's range) is ~1e-5 in these units.
// Stats over all valid frames (sum, sum of squares, min, max) catch errors outside the stored slices.
TEST(AudioFeatures, MatchesTransformersGoldens) {
  auto cfg = qo::load_whisper_feature_config(kDir);
  ASSERT_TRUE(cfg.ok());
  auto f = goldens();
  const auto cases = nlohmann::json::parse(f->metadata().at("cases"));
  ASSERT_GE(cases.size(), 30u);
  constexpr double kTol = 1e-4;
  double worst = 0.0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const int64_t n = c["samples"];
    const auto pcm = make_signal(c["signal"], n);
    auto got = qo::log_mel(pcm, *cfg);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    ASSERT_EQ(got->n_mels, 128);
    ASSERT_EQ(got->frames, c["valid_frames"].get<int64_t>());
    ASSERT_EQ(got->data.size(), static_cast<size_t>(128 * got->frames));
    EXPECT_EQ(got->truncated, n > cfg->n_samples());
    EXPECT_EQ(qo::audio_token_count(got->frames), c["tokens"].get<int64_t>());
    double err = 0.0;
    if (f->find(name + ".full")) {
      err = compare_slice(*f, name + ".full", *got, 0);
    } else {
      err = std::max(err, compare_slice(*f, name + ".head", *got, 0));
      err = std::max(err, compare_slice(*f, name + ".mid", *got, c["mid_start"].get<int64_t>()));
      err = std::max(err, compare_slice(*f, name + ".tail", *got, got->frames - 8));
    }
    EXPECT_LT(err, kTol);
    worst = std::max(worst, err);
    if (got->frames > 0) {
      double sum = 0, sum_sq = 0, mn = 1e30, mx = -1e30;
      for (float v : got->data) {
        sum += v;
        sum_sq += double{v} * v;
        mn = std::min(mn, double{v});
        mx = std::max(mx, double{v});
      }
      const double count = static_cast<double>(got->data.size());
      // Means of the values and squares agree within the per-element tolerance.
      EXPECT_NEAR(sum / count, c["sum"].get<double>() / count, kTol);
      EXPECT_NEAR(sum_sq / count, c["sum_sq"].get<double>() / count, 4 * kTol);
      EXPECT_NEAR(mn, c["min"].get<double>(), kTol);
      EXPECT_NEAR(mx, c["max"].get<double>(), kTol);
    }
  }
  std::printf("worst max abs error vs transformers: %.3g\n", worst);
}

// Against transformers' float64 numpy path (_np_extract_fbank_features, the same math in double):
// our double STFT / mel agree to the f32 output rounding (measured 1.2e-7 = 1 ulp near 1.0), so the
// bound, 5e-7, is 200x tighter than against the torch path. This shows that the 1e-4 above is the
// reference's float32 rounding, not ours (the goldens record transformers' own torch-vs-float64
// difference per case as max_abs_torch_vs_f64: up to 5.5e-5).
TEST(AudioFeatures, MatchesTransformersFloat64Path) {
  auto cfg = qo::load_whisper_feature_config(kDir);
  ASSERT_TRUE(cfg.ok());
  auto f = goldens();
  const auto cases = nlohmann::json::parse(f->metadata().at("cases"));
  int checked = 0;
  for (const auto& c : cases) {
    const std::string name = c["name"];
    if (!f->find(name + ".f64")) continue;
    SCOPED_TRACE(name);
    const auto pcm = make_signal(c["signal"], c["samples"].get<int64_t>());
    auto got = qo::log_mel(pcm, *cfg);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const double err = compare_slice(*f, name + ".f64", *got, 0);
    EXPECT_LT(err, 5e-7);
    std::printf("%s: max abs error vs float64 path %.3g (torch vs float64: %.3g)\n", name.c_str(), err,
                c["max_abs_torch_vs_f64"].get<double>());
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

// Frames are independent: any thread count gives bit-identical features.
TEST(AudioFeatures, ThreadCountDoesNotChangeResults) {
  auto cfg = qo::load_whisper_feature_config(kDir);
  ASSERT_TRUE(cfg.ok());
  const auto pcm = make_signal("chirp", 7 * kSr + 123);
  auto a = qo::log_mel(pcm, *cfg, 1);
  auto b = qo::log_mel(pcm, *cfg, 5);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->frames, b->frames);
  EXPECT_EQ(a->data, b->data);
}

// Empty input: no frames, no tokens, not an error.
TEST(AudioFeatures, EmptyInput) {
  auto cfg = qo::load_whisper_feature_config(kDir);
  ASSERT_TRUE(cfg.ok());
  auto got = qo::log_mel(std::span<const float>(), *cfg);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->frames, 0);
  EXPECT_TRUE(got->data.empty());
  EXPECT_EQ(qo::audio_token_count(got->frames), 0);
}

// Timing for the longest input the processor keeps (300 s, 30000 frames); not a test (no timed
// assertions): audio_features_test --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
TEST(AudioFeatures, DISABLED_Bench300s) {
  auto cfg = qo::load_whisper_feature_config(kDir);
  ASSERT_TRUE(cfg.ok());
  const auto pcm = make_signal("noise", cfg->n_samples());
  for (int threads : {1, 0}) {
    const auto t0 = std::chrono::steady_clock::now();
    auto got = qo::log_mel(pcm, *cfg, threads);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(got.ok());
    std::printf("300 s, %lld frames, threads=%d: %.1f ms\n", static_cast<long long>(got->frames), threads,
                ms);
  }
}
