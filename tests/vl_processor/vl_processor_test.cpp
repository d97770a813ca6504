// Qwen2-VL image processor vs transformers 5's default Qwen2VLImageProcessor (torchvision backend).
// Goldens: tests/fixtures/vl_processor/ from tools/reference/make_vl_processor_goldens.py.
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
#include "models/qwen_vl/processor_config.h"
#include "models/qwen_vl/resize.h"

namespace qv = loom::models::qwen_vl;
using loom::core::StatusCode;

namespace {

const std::string kDir = std::string(LOOM_FIXTURES_DIR) + "/vl_processor";

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

}  // namespace

// Every golden case, single- and multi-threaded. Tolerance: 0 (bit-exact). The resize reproduces
// torch's uint8 fixed-point kernel exactly (same int16 weights, rounding and clamping), and
// normalisation uses the same f32 operations as transformers' fused path, so any difference is a bug.
// (For reference, transformers' own PIL backend differs from its default backend by up to 0.22 in
// normalised units on these cases; see max_abs_diff_vs_pil in the goldens' metadata.)
TEST(VlProcessor, MatchesTransformersGoldens) {
  auto f = goldens();
  const auto meta = nlohmann::json::parse(f->metadata().at("cases"));
  ASSERT_GE(meta.size(), 10u);
  for (const auto& c : meta) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    auto cfg = qv::load_image_processor_config(kDir + "/" + c["config"].get<std::string>());
    ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
    const auto image = golden_tensor(*f, name + ".image");
    const auto want = golden_tensor(*f, name + ".pixel_values");
    const auto thw = golden_tensor(*f, name + ".grid_thw");
    const int32_t w = c["width"], h = c["height"];
    ASSERT_EQ(image.shape(), (loom::core::Shape{h, w, 3}));
    for (int threads : {1, 3}) {
      auto got = qv::process_image(image.data_as<uint8_t>(), w, h, *cfg, threads);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(got->grid_thw[0], thw.data_as<int64_t>()[0]);
      EXPECT_EQ(got->grid_thw[1], thw.data_as<int64_t>()[1]);
      EXPECT_EQ(got->grid_thw[2], thw.data_as<int64_t>()[2]);
      ASSERT_EQ(got->pixel_values.shape(), want.shape());
      EXPECT_EQ(got->num_tokens(), got->grid_thw[0] * got->grid_thw[1] * got->grid_thw[2] / 4);
      const float* g = got->pixel_values.data_as<float>();
      const float* r = want.data_as<float>();
      double max_abs = 0.0;
      int64_t mismatches = 0;
      for (int64_t i = 0; i < want.numel(); ++i) {
        const double d = std::fabs(static_cast<double>(g[i]) - r[i]);
        if (!(d == 0.0)) ++mismatches;  // NaN counts as a mismatch
        if (d > max_abs || std::isnan(d)) max_abs = std::isnan(d) ? INFINITY : d;
      }
      EXPECT_EQ(mismatches, 0) << "threads " << threads << " max abs diff " << max_abs;
    }
  }
}

// Expected values printed by transformers' smart_resize (Python), including round-half-to-even ties
// (42/28 = 1.5 -> 2, 70/28 = 2.5 -> 2; 14/28 = 0.5 -> 0) and the aspect-ratio limit.
TEST(VlProcessor, SmartResizeMatchesTransformers) {
  struct Case {
    int64_t h, w, factor, min_px, max_px, want_h, want_w;
  };
  const Case cases[] = {
      {42, 70, 28, 3136, 12845056, 56, 56},         {70, 42, 28, 3136, 1003520, 56, 56},
      {1, 200, 28, 3136, 12845056, 28, 812},        {1000, 2000, 28, 3136, 1003520, 700, 1400},
      {4000, 3000, 28, 3136, 12845056, 4004, 2996}, {13, 17, 28, 3136, 12845056, 56, 84},
      {99, 1001, 32, 1024, 65536, 64, 800},         {1500, 1500, 28, 3136, 1003520, 980, 980},
      {14, 2800, 28, 3136, 12845056, 28, 812},
  };
  for (const auto& c : cases) {
    auto r = qv::smart_resize(c.h, c.w, c.factor, c.min_px, c.max_px);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->first, c.want_h) << c.h << "x" << c.w;
    EXPECT_EQ(r->second, c.want_w) << c.h << "x" << c.w;
  }
  // transformers raises ValueError for ratio > 200 (2240/10 = 224, 2001/10 = 200.1).
  EXPECT_EQ(qv::smart_resize(2240, 10, 28, 784, 4704).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::smart_resize(2001, 10, 28, 784, 4704).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(qv::smart_resize(2000, 10, 28, 784, 4704).ok());
  EXPECT_EQ(qv::smart_resize(0, 10, 28, 784, 4704).status().code(), StatusCode::kInvalidArgument);
}

// Property check independent of the goldens: a constant image stays constant under any resize
// (weights of each output pixel sum to 2^precision up to rounding, which must not move a constant).
TEST(VlProcessor, ResizeKeepsConstantImages) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> size(1, 90), value(0, 255);
  for (int iter = 0; iter < 40; ++iter) {
    const int in_w = size(rng), in_h = size(rng), out_w = size(rng), out_h = size(rng);
    const uint8_t v = static_cast<uint8_t>(value(rng));
    std::vector<uint8_t> img(static_cast<size_t>(in_w) * in_h * 3, v);
    const auto out = qv::resize_bicubic_aa_u8(img.data(), in_w, in_h, 3, out_w, out_h, 2);
    ASSERT_EQ(out.size(), static_cast<size_t>(out_w) * out_h * 3);
    for (uint8_t o : out) ASSERT_NEAR(o, v, 1) << in_w << "x" << in_h << " -> " << out_w << "x" << out_h;
  }
}

TEST(VlProcessor, ProcessImageErrors) {
  qv::ImageProcessorConfig cfg;
  std::vector<uint8_t> img(30 * 30 * 3, 7);
  EXPECT_EQ(qv::process_image(nullptr, 30, 30, cfg).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::process_image(img.data(), 0, 30, cfg).status().code(), StatusCode::kInvalidArgument);
  cfg.do_resize = false;  // 30 is not a multiple of 28
  EXPECT_EQ(qv::process_image(img.data(), 30, 30, cfg).status().code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> ok(56 * 28 * 3, 7);
  auto r = qv::process_image(ok.data(), 56, 28, cfg);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->grid_thw, (std::array<int64_t, 3>{1, 2, 4}));
  EXPECT_EQ(r->num_tokens(), 2);
  std::vector<uint8_t> thin(300 * 1 * 3, 7);  // aspect ratio 300
  cfg.do_resize = true;
  EXPECT_EQ(qv::process_image(thin.data(), 300, 1, cfg).status().code(), StatusCode::kInvalidArgument);
}

TEST(VlProcessor, ConfigLoading) {
  auto d = qv::load_image_processor_config(kDir + "/cfg_default");
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->min_pixels, 3136);
  EXPECT_EQ(d->max_pixels, 12845056);
  auto n = qv::load_image_processor_config(kDir + "/cfg_nested");
  ASSERT_TRUE(n.ok()) << n.status().to_string();
  EXPECT_EQ(n->min_pixels, 1568);
  EXPECT_EQ(n->max_pixels, 6272);
  EXPECT_FLOAT_EQ(n->image_mean[1], 0.5f);
  EXPECT_EQ(qv::load_image_processor_config(kDir + "/no_such_dir").status().code(), StatusCode::kNotFound);

  // Top-level min_pixels/max_pixels override size, as Qwen2VLImageProcessor.__init__ does.
  auto o = qv::parse_image_processor_config(
      R"({"size": {"shortest_edge": 10, "longest_edge": 20}, "max_pixels": 5000})", "t");
  ASSERT_TRUE(o.ok()) << o.status().to_string();
  EXPECT_EQ(o->min_pixels, 10);
  EXPECT_EQ(o->max_pixels, 5000);
  EXPECT_EQ(qv::parse_image_processor_config("{", "t").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::parse_image_processor_config(R"({"resample": 2})", "t").status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(
      qv::parse_image_processor_config(R"({"min_pixels": 9000, "max_pixels": 100})", "t").status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::parse_image_processor_config(R"({"image_mean": [0.5, 0.5]})", "t").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::parse_image_processor_config(R"({"patch_size": "14"})", "t").status().code(),
            StatusCode::kInvalidArgument);
}

TEST(VlProcessor, PlaceholderExpansion) {
  const std::string pad = "<|image_pad|>";
  auto t = qv::expand_placeholders("a<|vision_start|>" + pad + "<|vision_end|>b" + pad + "c", pad, {3, 1});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(*t, "a<|vision_start|>" + pad + pad + pad + "<|vision_end|>b" + pad + "c");
  EXPECT_EQ(qv::expand_placeholders("x" + pad, pad, {}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(qv::expand_placeholders("x", pad, {2}).status().code(), StatusCode::kInvalidArgument);

  auto ids = qv::expand_placeholder_ids({1, 9, 2, 9, 3}, 9, {2, 0});
  ASSERT_TRUE(ids.ok()) << ids.status().to_string();
  EXPECT_EQ(*ids, (std::vector<int32_t>{1, 9, 9, 2, 3}));
  EXPECT_EQ(qv::expand_placeholder_ids({9, 9}, 9, {1}).status().code(), StatusCode::kInvalidArgument);
}
