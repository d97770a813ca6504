// Qwen2-VL video processor vs transformers 5.24's Qwen2VLVideoProcessor (torchvision backend).
// Goldens: tests/fixtures/vl_video_processor/ from tools/reference/make_vl_video_processor_goldens.py.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "models/checkpoint/safetensors.h"
#include "models/qwen_vl/image_processor.h"
#include "models/qwen_vl/video_processor.h"

namespace qv = loom::models::qwen_vl;
using loom::core::StatusCode;

namespace {

const std::string kDir = std::string(LOOM_FIXTURES_DIR) + "/vl_video_processor";

std::shared_ptr<const loom::models::SafetensorsFile> goldens() {
  auto f = loom::models::SafetensorsFile::open(kDir + "/goldens.safetensors");
  LOOM_CHECK(f.ok()) << f.status().to_string();
  return *f;
}

loom::core::Tensor golden_tensor(const loom::models::SafetensorsFile& f, const std::string& name) {
  const auto* e = f.find(name);
  LOOM_CHECK(e != nullptr) << "missing golden " << name;
  auto t = f.tensor(*e);
  LOOM_CHECK(t.ok()) << t.status().to_string();
  return *t;
}

// Number of elements that differ (NaN counts as different) and the max abs difference.
std::pair<int64_t, double> compare(const float* got, const float* want, int64_t n) {
  int64_t mismatches = 0;
  double max_abs = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(d == 0.0)) ++mismatches;
    if (std::isnan(d))
      max_abs = INFINITY;
    else if (d > max_abs)
      max_abs = d;
  }
  return {mismatches, max_abs};
}

std::vector<uint8_t> random_frames(std::mt19937& rng, int64_t n, int32_t w, int32_t h) {
  std::uniform_int_distribution<int> v(0, 255);
  std::vector<uint8_t> data(static_cast<size_t>(n * w * h * 3));
  for (auto& b : data) b = static_cast<uint8_t>(v(rng));
  return data;
}

std::vector<const uint8_t*> frame_ptrs(const std::vector<uint8_t>& data, int64_t n, int32_t w, int32_t h) {
  std::vector<const uint8_t*> p;
  for (int64_t i = 0; i < n; ++i) p.push_back(data.data() + i * w * h * 3);
  return p;
}

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("loom_vproc_" + std::to_string(std::random_device{}()) + "_" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path_ / name) << text; }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

}  // namespace

// Every golden case (frame counts 1, 2, 3, 4, 5... incl. odd counts padded by repeating the last
// frame, temporal_patch_size 2 and 3, resize up/down/none, the total-pixel cap), single- and
// multi-threaded. Tolerance: 0 (bit-exact): frames go through the image path, which reproduces torch's
// uint8 resize kernel and transformers' f32 normalisation exactly; any difference is a bug.
TEST(VlVideoProcessor, MatchesTransformersGoldens) {
  auto f = goldens();
  const auto meta = nlohmann::json::parse(f->metadata().at("cases"));
  ASSERT_GE(meta.size(), 13u);
  for (const auto& c : meta) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    auto cfg = qv::load_video_processor_config(kDir + "/" + c["config"].get<std::string>());
    ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
    const auto frames = golden_tensor(*f, name + ".frames");
    const auto want = golden_tensor(*f, name + ".pixel_values");
    const auto thw = golden_tensor(*f, name + ".grid_thw");
    const int32_t w = c["width"], h = c["height"];
    const int64_t n = c["frames"];
    ASSERT_EQ(frames.shape(), (loom::core::Shape{n, h, w, 3}));
    std::vector<const uint8_t*> ptrs;
    for (int64_t i = 0; i < n; ++i) ptrs.push_back(frames.data_as<uint8_t>() + i * h * w * 3);
    for (int threads : {1, 3}) {
      auto got = qv::process_video(ptrs, w, h, *cfg, threads);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      for (int k = 0; k < 3; ++k) EXPECT_EQ(got->grid_thw[k], thw.data_as<int64_t>()[k]) << "axis " << k;
      ASSERT_EQ(got->pixel_values.shape(), want.shape());
      const int64_t m = cfg->image.merge_size;
      EXPECT_EQ(got->num_tokens(), got->grid_thw[0] * got->grid_thw[1] * got->grid_thw[2] / (m * m));
      const auto [mismatches, max_abs] =
          compare(got->pixel_values.data_as<float>(), want.data_as<float>(), want.numel());
      EXPECT_EQ(mismatches, 0) << "threads " << threads << " max abs diff " << max_abs;
    }
  }
}

// The loader resolves every fixture config (incl. one with no "size", the preprocessor_config.json
// fallback and top-level min/max_pixels) to the values transformers' instance holds.
TEST(VlVideoProcessor, ConfigMatchesTransformersResolution) {
  auto f = goldens();
  const auto configs = nlohmann::json::parse(f->metadata().at("configs"));
  ASSERT_GE(configs.size(), 6u);
  for (const auto& [name, r] : configs.items()) {
    SCOPED_TRACE(name);
    auto cfg = qv::load_video_processor_config(kDir + "/" + name);
    ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
    EXPECT_EQ(cfg->image.min_pixels, r["shortest_edge"].get<int64_t>());
    EXPECT_EQ(cfg->image.max_pixels, r["longest_edge"].get<int64_t>());
    EXPECT_EQ(cfg->image.patch_size, r["patch_size"].get<int32_t>());
    EXPECT_EQ(cfg->image.temporal_patch_size, r["temporal_patch_size"].get<int32_t>());
    EXPECT_EQ(cfg->image.merge_size, r["merge_size"].get<int32_t>());
    EXPECT_EQ(cfg->cap_pixels_per_frame, r["cap_pixels_per_frame"].get<bool>());
    EXPECT_EQ(cfg->max_video_tokens, r["max_video_tokens"].get<int64_t>());
    EXPECT_EQ(cfg->image.do_normalize, r["do_normalize"].get<bool>());
    for (int k = 0; k < 3; ++k) EXPECT_EQ(cfg->image.image_mean[k], r["image_mean"][k].get<float>());
  }
}

// Values computed by hand from transformers' formula
// max(min(longest, int(tokens * factor^2 * 0.9) * temporal // frames), int(shortest * 1.05)).
TEST(VlVideoProcessor, FrameMaxPixelsCap) {
  qv::VideoProcessorConfig cfg;
  cfg.image.patch_size = 4;
  cfg.image.merge_size = 2;
  cfg.image.min_pixels = 64;
  cfg.image.max_pixels = 4096;
  EXPECT_EQ(cfg.frame_max_pixels(6), 4096);  // cap off
  cfg.cap_pixels_per_frame = true;
  cfg.max_video_tokens = 40;                 // total = int(2560 * 0.9) = 2304
  EXPECT_EQ(cfg.frame_max_pixels(1), 4096);  // 4608 > longest
  EXPECT_EQ(cfg.frame_max_pixels(2), 2304);
  EXPECT_EQ(cfg.frame_max_pixels(6), 768);
  EXPECT_EQ(cfg.frame_max_pixels(7), 658);   // 4608 // 7
  EXPECT_EQ(cfg.frame_max_pixels(100), 67);  // floor int(64 * 1.05)
  // Qwen2.5-VL-style numbers: factor 28, 128000 tokens -> total 90316800.
  qv::VideoProcessorConfig real;
  real.cap_pixels_per_frame = true;
  EXPECT_EQ(real.frame_max_pixels(768), std::min<int64_t>(28 * 28 * 768, 90316800LL * 2 / 768));
  EXPECT_EQ(real.frame_max_pixels(4), 28 * 28 * 768);
}

// Independent of the goldens: an odd frame count gives exactly what the same video with its last
// frame repeated gives (transformers pads that way), and a single frame equals the still-image path
// (which fills every temporal slot with the one frame). Random sizes and frames each run.
TEST(VlVideoProcessor, PaddingRepeatsLastFrame) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> side(3, 70), count(1, 7), tps(1, 3);
  for (int iter = 0; iter < 16; ++iter) {
    // Force the single-frame case at least once.
    const int32_t w = side(rng), h = side(rng);
    const int64_t n = iter == 0 ? 1 : count(rng);
    qv::VideoProcessorConfig cfg;
    cfg.image.patch_size = 4;
    cfg.image.merge_size = 2;
    cfg.image.temporal_patch_size = tps(rng);
    cfg.image.min_pixels = 64;
    cfg.image.max_pixels = 2048;
    SCOPED_TRACE(std::to_string(n) + " frames " + std::to_string(w) + "x" + std::to_string(h) + " T " +
                 std::to_string(cfg.image.temporal_patch_size));
    const auto data = random_frames(rng, n, w, h);
    auto ptrs = frame_ptrs(data, n, w, h);
    auto got = qv::process_video(ptrs, w, h, cfg, 2);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const int64_t t_len = cfg.image.temporal_patch_size;
    const int64_t padded = (n + t_len - 1) / t_len * t_len;
    EXPECT_EQ(got->grid_thw[0], padded / t_len);
    while (static_cast<int64_t>(ptrs.size()) < padded) ptrs.push_back(ptrs.back());
    auto full = qv::process_video(ptrs, w, h, cfg, 1);
    ASSERT_TRUE(full.ok()) << full.status().to_string();
    ASSERT_EQ(full->pixel_values.shape(), got->pixel_values.shape());
    EXPECT_EQ(compare(got->pixel_values.data_as<float>(), full->pixel_values.data_as<float>(),
                      full->pixel_values.numel())
                  .first,
              0);
    if (n == 1) {
      auto image = qv::process_image(ptrs[0], w, h, cfg.image, 1);
      ASSERT_TRUE(image.ok()) << image.status().to_string();
      EXPECT_EQ(image->grid_thw, got->grid_thw);
      ASSERT_EQ(image->pixel_values.shape(), got->pixel_values.shape());
      EXPECT_EQ(compare(got->pixel_values.data_as<float>(), image->pixel_values.data_as<float>(),
                        image->pixel_values.numel())
                    .first,
                0);
    }
  }
}

TEST(VlVideoProcessor, ProcessVideoErrors) {
  qv::VideoProcessorConfig cfg;
  std::vector<uint8_t> frame(30 * 30 * 3, 7);
  std::vector<const uint8_t*> none;
  EXPECT_EQ(qv::process_video(none, 30, 30, cfg).status().code(), StatusCode::kInvalidArgument);
  std::vector<const uint8_t*> with_null = {frame.data(), nullptr};
  EXPECT_EQ(qv::process_video(with_null, 30, 30, cfg).status().code(), StatusCode::kInvalidArgument);
  std::vector<const uint8_t*> two = {frame.data(), frame.data()};
  EXPECT_EQ(qv::process_video(two, 0, 30, cfg).status().code(), StatusCode::kInvalidArgument);
  cfg.image.do_resize = false;  // 30 is not a multiple of 28
  EXPECT_EQ(qv::process_video(two, 30, 30, cfg).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> ok(56 * 28 * 3, 7);
  std::vector<const uint8_t*> three = {ok.data(), ok.data(), ok.data()};
  auto r = qv::process_video(three, 56, 28, cfg);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->grid_thw, (std::array<int64_t, 3>{2, 2, 4}));
  EXPECT_EQ(r->num_tokens(), 4);
  std::vector<uint8_t> thin(300 * 3, 7);  // aspect ratio 300
  std::vector<const uint8_t*> thin2 = {thin.data(), thin.data()};
  cfg.image.do_resize = true;
  EXPECT_EQ(qv::process_video(thin2, 300, 1, cfg).status().code(), StatusCode::kInvalidArgument);
}

TEST(VlVideoProcessor, ConfigLoading) {
  {  // Nested section wins over the other files.
    TempDir d;
    d.write("processor_config.json",
            R"({"video_processor": {"size": {"shortest_edge": 10, "longest_edge": 20}}})");
    d.write("video_preprocessor_config.json", R"({"size": {"shortest_edge": 30, "longest_edge": 40}})");
    auto c = qv::load_video_processor_config(d.str());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->image.min_pixels, 10);
    EXPECT_EQ(c->image.max_pixels, 20);
  }
  {  // processor_config.json without "video_processor" -> video file -> image file.
    TempDir d;
    d.write("processor_config.json", R"({"image_processor": {"min_pixels": 1}})");
    d.write("preprocessor_config.json", R"({"min_pixels": 100, "max_pixels": 200, "fps": 2.0,
                                            "do_sample_frames": true, "min_frames": 2})");
    auto c = qv::load_video_processor_config(d.str());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->image.min_pixels, 100);
    EXPECT_EQ(c->image.max_pixels, 200);
    ASSERT_TRUE(c->fps.has_value());
    EXPECT_EQ(*c->fps, 2.0);
    EXPECT_TRUE(c->do_sample_frames);
    EXPECT_EQ(c->min_frames, 2);
    EXPECT_EQ(c->max_frames, 768);
    EXPECT_FALSE(c->num_frames.has_value());
    d.write("video_preprocessor_config.json", R"({"max_pixels": 5000})");
    // Now the video file wins; its max_pixels is below the class default shortest_edge (100352).
    // transformers would run smart_resize with min > max; we reject such a config instead.
    EXPECT_EQ(qv::load_video_processor_config(d.str()).status().code(), StatusCode::kInvalidArgument);
    d.write("video_preprocessor_config.json", R"({"max_pixels": 500000})");
    c = qv::load_video_processor_config(d.str());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->image.min_pixels, 128 * 28 * 28);
    EXPECT_EQ(c->image.max_pixels, 500000);
    EXPECT_FALSE(c->fps.has_value());
  }
  {
    TempDir d;
    EXPECT_EQ(qv::load_video_processor_config(d.str()).status().code(), StatusCode::kNotFound);
  }
  auto bad = [](const std::string& text) {
    return qv::parse_video_processor_config(text, "t").status().code();
  };
  EXPECT_EQ(bad("{"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad("[]"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(R"({"size": {"longest_edge": 100}})"), StatusCode::kInvalidArgument);  // transformers raises
  EXPECT_EQ(bad(R"({"cap_pixels_per_frame": 1})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(R"({"max_video_tokens": 0})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(R"({"fps": "2"})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(R"({"resample": 2})"), StatusCode::kUnsupported);
  EXPECT_TRUE(
      qv::parse_video_processor_config(R"({"size": {"longest_edge": 100}, "do_resize": false})", "t").ok());
  auto defaults = qv::parse_video_processor_config("{}", "t");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->image.min_pixels, 128 * 28 * 28);
  EXPECT_EQ(defaults->image.max_pixels, 28 * 28 * 768);
  EXPECT_FALSE(defaults->cap_pixels_per_frame);
}
