// Qwen3-VL processor side vs transformers 5.24: Qwen3VLVideoProcessor (sampling, smart_resize, pixels),
// Qwen2VLImageProcessor with Qwen3-VL settings, Qwen3VLProcessor's timestamps and prompt expansion,
// Qwen3VLModel.get_rope_index / compute_3d_position_ids. Goldens: tests/fixtures/q3vl_processor/ from
// tools/reference/make_qwen3vl_processor_goldens.py. Clips (tests/fixtures/media_video) are decoded by
// loom::media here; the goldens decoded them with the ffmpeg CLI, which loom's decoder matches exactly.
//
// Tolerances: 0 everywhere. Indices, grids, texts, token ids and positions are integers or strings.
// Timestamps are computed with the same double operations as Python (index / fps, mean of two) and
// read back from JSON's shortest round-trip repr, so they are compared for equality. Pixel values are
// bit-exact as in tests/vl_video_processor: torch's uint8 resize kernel and transformers' f32
// normalisation are reproduced exactly, and decoded frames equal the ffmpeg CLI's (media_video test),
// so any difference is a bug.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "media/video.h"
#include "models/checkpoint/safetensors.h"
#include "models/qwen3_vl/mrope_positions.h"
#include "models/qwen3_vl/processor.h"
#include "models/qwen3_vl/video_processor.h"
#include "models/qwen_vl/image_processor.h"
#include "text/tokenizer.h"

namespace q3 = loom::models::qwen3_vl;
namespace qv = loom::models::qwen_vl;
using loom::core::StatusCode;
using Json = nlohmann::json;

namespace {

const std::string kDir = std::string(LOOM_FIXTURES_DIR) + "/q3vl_processor";

const Json& goldens() {
  static const Json j = [] {
    std::ifstream in(kDir + "/goldens.json");
    LOOM_CHECK(in.good()) << "missing goldens.json";
    return Json::parse(in);
  }();
  return j;
}

std::shared_ptr<const loom::models::SafetensorsFile> tensors() {
  static auto f = [] {
    auto r = loom::models::SafetensorsFile::open(kDir + "/goldens.safetensors");
    LOOM_CHECK(r.ok()) << r.status().to_string();
    return *r;
  }();
  return f;
}

loom::core::Tensor golden_tensor(const std::string& name) {
  const auto* e = tensors()->find(name);
  LOOM_CHECK(e != nullptr) << "missing golden " << name;
  auto t = tensors()->tensor(*e);
  LOOM_CHECK(t.ok()) << t.status().to_string();
  return *t;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing " << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Elements that differ (NaN counts) and the max abs difference.
std::pair<int64_t, double> compare(const loom::core::Tensor& got, const loom::core::Tensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  if (got.shape() != want.shape()) return {-1, INFINITY};
  const float* g = got.data_as<float>();
  const float* w = want.data_as<float>();
  int64_t mismatches = 0;
  double max_abs = 0.0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double d = std::fabs(static_cast<double>(g[i]) - w[i]);
    if (!(d == 0.0)) ++mismatches;
    max_abs = std::isnan(d) ? INFINITY : std::max(max_abs, d);
  }
  return {mismatches, max_abs};
}

std::array<int64_t, 3> grid_of(const Json& j) {
  return {j[0].get<int64_t>(), j[1].get<int64_t>(), j[2].get<int64_t>()};
}

// A decoded, sampled and processed clip, as a serving path would do it.
struct ClipResult {
  std::vector<int64_t> indices;
  std::vector<double> timestamps;
  qv::ProcessedImage processed;
  double fps = 0;
};

ClipResult process_clip(const std::string& file, const q3::VideoProcessorConfig& cfg, int threads) {
  ClipResult r;
  const auto bytes = read_bytes(std::string(LOOM_FIXTURES_DIR) + "/media_video/" + file);
  auto info = loom::media::probe_video(bytes);
  LOOM_CHECK(info.ok()) << info.status().to_string();
  r.fps = info->fps;
  auto idx = q3::sample_frame_indices({info->num_frames, info->fps}, cfg);
  LOOM_CHECK(idx.ok()) << idx.status().to_string();
  r.indices = *idx;
  auto frames = loom::media::decode_video_frames(bytes, r.indices);
  LOOM_CHECK(frames.ok()) << frames.status().to_string();
  std::vector<const uint8_t*> ptrs;
  for (const auto& f : *frames) ptrs.push_back(f.image.rgb.data());
  auto out = q3::process_video(ptrs, info->width, info->height, cfg, threads);
  LOOM_CHECK(out.ok()) << out.status().to_string();
  r.processed = std::move(*out);
  r.timestamps = q3::frame_timestamps(r.indices, info->fps, cfg.image.temporal_patch_size);
  return r;
}

q3::VideoProcessorConfig video_config(const std::string& name) {
  auto c = q3::load_video_processor_config(kDir + "/" + name);
  LOOM_CHECK(c.ok()) << c.status().to_string();
  return *c;
}

}  // namespace

// Every fixture config (the shipped Qwen3-VL files, the v5 nested layout, class defaults only, fps
// null + num_frames) resolves to the values transformers' instances hold.
TEST(Q3vlProcessor, ConfigMatchesTransformersResolution) {
  const Json& configs = goldens()["configs"];
  ASSERT_GE(configs.size(), 5u);
  for (const auto& [name, r] : configs.items()) {
    SCOPED_TRACE(name);
    const Json& v = r["video"];
    auto c = q3::load_video_processor_config(kDir + "/" + name);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->image.min_pixels, v["shortest_edge"].get<int64_t>());
    EXPECT_EQ(c->image.max_pixels, v["longest_edge"].get<int64_t>());
    EXPECT_EQ(c->image.patch_size, v["patch_size"].get<int32_t>());
    EXPECT_EQ(c->image.temporal_patch_size, v["temporal_patch_size"].get<int32_t>());
    EXPECT_EQ(c->image.merge_size, v["merge_size"].get<int32_t>());
    for (int k = 0; k < 3; ++k) {
      EXPECT_EQ(c->image.image_mean[k], v["image_mean"][k].get<float>());
      EXPECT_EQ(c->image.image_std[k], v["image_std"][k].get<float>());
    }
    EXPECT_EQ(c->image.do_normalize, v["do_normalize"].get<bool>());
    EXPECT_EQ(c->do_sample_frames, v["do_sample_frames"].get<bool>());
    EXPECT_EQ(c->cap_pixels_per_frame, v["cap_pixels_per_frame"].get<bool>());
    EXPECT_EQ(c->max_video_tokens, v["max_video_tokens"].get<int64_t>());
    EXPECT_EQ(c->min_frames, v["min_frames"].get<int64_t>());
    EXPECT_EQ(c->max_frames, v["max_frames"].get<int64_t>());
    EXPECT_EQ(c->fps.has_value(), !v["fps"].is_null());
    if (c->fps && !v["fps"].is_null()) EXPECT_EQ(*c->fps, v["fps"].get<double>());
    EXPECT_EQ(c->num_frames.has_value(), !v["num_frames"].is_null());
    if (c->num_frames && !v["num_frames"].is_null())
      EXPECT_EQ(*c->num_frames, v["num_frames"].get<int64_t>());
    if (r.contains("image")) {
      auto p = q3::load_processor_config(kDir + "/" + name);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_EQ(p->image.min_pixels, r["image"]["shortest_edge"].get<int64_t>());
      EXPECT_EQ(p->image.max_pixels, r["image"]["longest_edge"].get<int64_t>());
      EXPECT_EQ(p->image.patch_size, r["image"]["patch_size"].get<int32_t>());
      EXPECT_EQ(p->image.merge_size, r["image"]["merge_size"].get<int32_t>());
      for (int k = 0; k < 3; ++k) EXPECT_EQ(p->image.image_mean[k], r["image"]["image_mean"][k].get<float>());
    }
  }
}

// sample_frames on synthetic metadata (fps / num_frames / neither, min and max frames binding, unknown
// video fps, videos shorter than min_frames, num_frames above the frame count, both set -> error) and
// the processor's timestamps for temporal_patch_size 1, 2, 3, values and "<t seconds>" text.
TEST(Q3vlProcessor, SamplingAndTimestampsMatchTransformers) {
  const Json& cases = goldens()["sampling"];
  ASSERT_GE(cases.size(), 25u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dump());
    q3::VideoProcessorConfig cfg;
    cfg.min_frames = c["min_frames"];
    cfg.max_frames = c["max_frames"];
    cfg.fps.reset();
    if (!c["fps"].is_null()) cfg.fps = c["fps"].get<double>();
    if (!c["num_frames"].is_null()) cfg.num_frames = c["num_frames"].get<int64_t>();
    q3::VideoMetadata meta{c["total_num_frames"].get<int64_t>(), std::nullopt};
    if (!c["video_fps"].is_null()) meta.fps = c["video_fps"].get<double>();
    auto got = q3::sample_frame_indices(meta, cfg);
    if (c.contains("error")) {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(*got, c["indices"].get<std::vector<int64_t>>());
    for (int tps = 1; tps <= 3; ++tps) {
      const auto ts = q3::frame_timestamps(*got, meta.fps.value_or(24.0), tps);
      const auto want = c["timestamps_t" + std::to_string(tps)].get<std::vector<double>>();
      const auto want_text =
          c["timestamps_t" + std::to_string(tps) + "_text"].get<std::vector<std::string>>();
      ASSERT_EQ(ts.size(), want.size()) << "tps " << tps;
      for (size_t i = 0; i < ts.size(); ++i) {
        EXPECT_EQ(ts[i], want[i]) << "tps " << tps << " step " << i;
        EXPECT_EQ(q3::format_timestamp(ts[i]), want_text[i]) << "tps " << tps << " step " << i;
      }
    }
  }
}

// The video smart_resize: scale-up of sides below the factor, the aspect-ratio and frame-count errors,
// the total-pixel bounds with the temporal factor, rounding half to even.
TEST(Q3vlProcessor, SmartResizeMatchesTransformers) {
  const Json& cases = goldens()["smart_resize"];
  ASSERT_GE(cases.size(), 20u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.dump());
    auto got = q3::smart_resize_video(c["num_frames"], c["height"], c["width"], c["temporal_factor"],
                                      c["factor"], c["min_pixels"], c["max_pixels"]);
    if (c.contains("error")) {
      EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
      continue;
    }
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_EQ(got->first, c["resized"][0].get<int64_t>());
    EXPECT_EQ(got->second, c["resized"][1].get<int64_t>());
  }
}

// Real clips end to end: loom::media decodes, our sampler picks the frames, process_video resizes,
// normalises and patchifies; indices, timestamps, grid and pixels must equal transformers'.
TEST(Q3vlProcessor, ClipsMatchTransformers) {
  const Json& cases = goldens()["clip_cases"];
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const auto cfg = video_config(c["config"]);
    for (int threads : {1, 3}) {
      const ClipResult r = process_clip(c["file"], cfg, threads);
      EXPECT_EQ(r.fps, c["fps"].get<double>());
      EXPECT_EQ(r.indices, c["indices"].get<std::vector<int64_t>>());
      EXPECT_EQ(r.timestamps, c["timestamps"].get<std::vector<double>>());
      EXPECT_EQ(r.processed.grid_thw, grid_of(c["grid_thw"]));
      const auto [mismatches, max_abs] =
          compare(r.processed.pixel_values, golden_tensor(name + ".pixel_values"));
      EXPECT_EQ(mismatches, 0) << "threads " << threads << " max abs diff " << max_abs;
    }
  }
}

// Synthetic frame stacks without sampling: odd frame counts (padding), T = 3, merge 1, rescale only,
// sides below the factor, a 5:1 frame scaled down.
TEST(Q3vlProcessor, FramesMatchTransformers) {
  const Json& cases = goldens()["synth_cases"];
  ASSERT_GE(cases.size(), 5u);
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const auto cfg = video_config(c["config"]);
    const auto frames = golden_tensor(name + ".frames");
    const int32_t w = c["width"], h = c["height"];
    const int64_t n = c["frames"];
    ASSERT_EQ(frames.shape(), (loom::core::Shape{n, h, w, 3}));
    std::vector<const uint8_t*> ptrs;
    for (int64_t i = 0; i < n; ++i) ptrs.push_back(frames.data_as<uint8_t>() + i * h * w * 3);
    for (int threads : {1, 3}) {
      auto got = q3::process_video(ptrs, w, h, cfg, threads);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_EQ(got->grid_thw, grid_of(c["grid_thw"]));
      const auto [mismatches, max_abs] = compare(got->pixel_values, golden_tensor(name + ".pixel_values"));
      EXPECT_EQ(mismatches, 0) << "threads " << threads << " max abs diff " << max_abs;
    }
  }
}

// Whole prompts with images and videos mixed with text: pixels of the images, grids and timestamps of
// the (decoded) videos, the expanded text, its token ids (our tokenizer on our text), and the M-RoPE
// positions, rope delta and decode positions from those ids.
TEST(Q3vlProcessor, PromptsMatchTransformers) {
  auto tok = loom::text::Tokenizer::from_file(std::string(LOOM_FIXTURES_DIR) + "/tokenizer/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const Json& cases = goldens()["prompt_cases"];
  ASSERT_GE(cases.size(), 6u);
  int image_pad_id = -1, video_pad_id = -1;
  {
    auto ids = tok->encode("<|image_pad|><|video_pad|>");
    ASSERT_EQ(ids.size(), 2u);
    image_pad_id = ids[0];
    video_pad_id = ids[1];
  }
  for (const auto& c : cases) {
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    auto icfg = q3::load_processor_config(kDir + "/" + c["image_config"].get<std::string>());
    ASSERT_TRUE(icfg.ok()) << icfg.status().to_string();
    const auto vcfg = video_config(c["video_config"]);

    std::vector<std::array<int64_t, 3>> image_grids;
    for (size_t i = 0; i < c["image_sizes"].size(); ++i) {
      const auto rgb = golden_tensor(name + ".image" + std::to_string(i) + ".rgb");
      const auto h = static_cast<int32_t>(rgb.shape()[0]), w = static_cast<int32_t>(rgb.shape()[1]);
      auto img = qv::process_image(rgb.data_as<uint8_t>(), w, h, icfg->image, 2);
      ASSERT_TRUE(img.ok()) << img.status().to_string();
      EXPECT_EQ(img->grid_thw, grid_of(c["image_grid_thw"][i]));
      const auto [mismatches, max_abs] =
          compare(img->pixel_values, golden_tensor(name + ".image" + std::to_string(i) + ".pixel_values"));
      EXPECT_EQ(mismatches, 0) << "image " << i << " max abs diff " << max_abs;
      image_grids.push_back(img->grid_thw);
    }
    std::vector<q3::VideoPrompt> videos;
    for (size_t i = 0; i < c["videos"].size(); ++i) {
      const ClipResult r = process_clip(c["videos"][i], vcfg, 2);
      EXPECT_EQ(r.indices, c["video_indices"][i].get<std::vector<int64_t>>());
      EXPECT_EQ(r.timestamps, c["video_timestamps"][i].get<std::vector<double>>());
      EXPECT_EQ(r.processed.grid_thw, grid_of(c["video_grid_thw"][i]));
      videos.push_back({r.processed.grid_thw, r.timestamps});
    }

    auto text =
        q3::expand_prompt(c["text"], image_grids, videos, icfg->image.merge_size, vcfg.image.merge_size);
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    EXPECT_EQ(*text, c["expanded_text"].get<std::string>());
    const auto want_ids = c["input_ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok->encode(*text), want_ids);

    std::vector<q3::VisionGrid> ig, vg;
    for (const auto& g : image_grids) ig.push_back({g[0], g[1], g[2]});
    for (const auto& v : videos) vg.push_back({v.grid_thw[0], v.grid_thw[1], v.grid_thw[2]});
    const q3::MropeConfig mcfg{image_pad_id, video_pad_id, c["spatial_merge_size"].get<int32_t>()};
    auto pos = q3::mrope_positions(want_ids, ig, vg, mcfg);
    ASSERT_TRUE(pos.ok()) << pos.status().to_string();
    const auto want_pos = c["positions"].get<std::vector<std::vector<int32_t>>>();
    ASSERT_EQ(want_pos.size(), 3u);
    EXPECT_EQ(pos->t, want_pos[0]);
    EXPECT_EQ(pos->h, want_pos[1]);
    EXPECT_EQ(pos->w, want_pos[2]);
    EXPECT_EQ(pos->rope_delta, c["rope_delta"].get<int64_t>());
    auto dec = q3::mrope_decode_positions(static_cast<int64_t>(want_ids.size()), 3, pos->rope_delta);
    ASSERT_TRUE(dec.ok()) << dec.status().to_string();
    const auto want_dec = c["decode_positions"].get<std::vector<std::vector<int32_t>>>();
    for (size_t k = 0; k < want_dec.size(); ++k) {
      EXPECT_EQ(dec->t[k], want_dec[k][0]);
      EXPECT_EQ(dec->h[k], want_dec[k][1]);
      EXPECT_EQ(dec->w[k], want_dec[k][2]);
    }
  }
}

// Independent of the goldens: each frame of a video is positioned like a one-frame image at the
// running position (temporal index = start), and the text after a video continues at
// start + frames * (timestamp text + 2) + sum of max(h, w) / merge; random grids each run.
TEST(Q3vlProcessor, VideoFramesPositionedLikeImages) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> side(1, 5), frames(1, 4), text(1, 6);
  constexpr int32_t kImg = 7, kVid = 8, kText = 1;
  for (int iter = 0; iter < 20; ++iter) {
    const int64_t gt = frames(rng), gh = 2 * side(rng), gw = 2 * side(rng);
    const int64_t ts_len = text(rng), lead = text(rng);
    std::vector<int32_t> ids(static_cast<size_t>(lead), kText);
    for (int64_t f = 0; f < gt; ++f) {
      ids.insert(ids.end(), static_cast<size_t>(ts_len + 1), kText);  // "<t seconds>" + vision_start
      ids.insert(ids.end(), static_cast<size_t>(gh * gw / 4), kVid);
      ids.push_back(kText);  // vision_end
    }
    ids.push_back(kText);
    const q3::VisionGrid g{gt, gh, gw};
    auto pos = q3::mrope_positions(ids, {}, std::span<const q3::VisionGrid>(&g, 1), {kImg, kVid, 2});
    ASSERT_TRUE(pos.ok()) << pos.status().to_string();
    int64_t p = lead, i = lead;
    for (int64_t f = 0; f < gt; ++f) {
      for (int64_t k = 0; k < ts_len + 1; ++k, ++i, ++p) EXPECT_EQ(pos->t[i], p);
      for (int64_t y = 0; y < gh / 2; ++y)
        for (int64_t x = 0; x < gw / 2; ++x, ++i) {
          EXPECT_EQ(pos->t[i], p);
          EXPECT_EQ(pos->h[i], p + y);
          EXPECT_EQ(pos->w[i], p + x);
        }
      p += std::max(gh, gw) / 2;
      EXPECT_EQ(pos->t[i], p);  // vision_end
      ++i;
      ++p;
    }
    EXPECT_EQ(pos->w[i], p);
    EXPECT_EQ(pos->rope_delta, p + 1 - static_cast<int64_t>(ids.size()));
  }
}

TEST(Q3vlProcessor, Errors) {
  // Placeholder counts must match the media given.
  const std::string prompt = "a <|image_pad|> b <|video_pad|> c";
  q3::VideoPrompt v{{2, 4, 4}, {0.5, 1.5}};
  EXPECT_TRUE(q3::expand_prompt(prompt, {{1, 2, 2}}, {v}, 2, 2).ok());
  EXPECT_EQ(q3::expand_prompt(prompt, {}, {v}, 2, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::expand_prompt(prompt, {{1, 2, 2}}, {}, 2, 2).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::expand_prompt(prompt, {{1, 2, 2}}, {v, v}, 2, 2).status().code(),
            StatusCode::kInvalidArgument);
  q3::VideoPrompt short_ts{{2, 4, 4}, {0.5}};
  EXPECT_EQ(q3::expand_prompt(prompt, {{1, 2, 2}}, {short_ts}, 2, 2).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::expand_prompt(prompt, {{1, 3, 2}}, {v}, 2, 2).status().code(), StatusCode::kInvalidArgument);
  auto vp = q3::video_placeholder(v, 2);
  ASSERT_TRUE(vp.ok());
  EXPECT_EQ(
      *vp,
      "<0.5 seconds><|vision_start|><|video_pad|><|video_pad|><|video_pad|><|video_pad|><|vision_end|>"
      "<1.5 seconds><|vision_start|><|video_pad|><|video_pad|><|video_pad|><|video_pad|><|vision_end|>");
  // Python's f"{x:.1f}": correctly rounded from the binary value (0.25 -> 0.2, 0.35 -> 0.3, 2.675 -> 2.7).
  EXPECT_EQ(q3::format_timestamp(0.25), "<0.2 seconds>");
  EXPECT_EQ(q3::format_timestamp(0.35), "<0.3 seconds>");
  EXPECT_EQ(q3::format_timestamp(0.05), "<0.1 seconds>");

  // Config errors.
  auto bad = [](const std::string& text) {
    return q3::parse_video_processor_config(text, "t").status().code();
  };
  EXPECT_EQ(bad("{"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad("[]"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(R"({"num_frames": 4})"), StatusCode::kInvalidArgument);  // fps 2 by default: exclusive
  EXPECT_TRUE(q3::parse_video_processor_config(R"({"num_frames": 4, "fps": null})", "t").ok());
  EXPECT_EQ(bad(R"({"size": {"longest_edge": 100}})"), StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      q3::parse_video_processor_config(R"({"size": {"longest_edge": 100}, "do_resize": false})", "t").ok());
  EXPECT_EQ(bad(R"({"fps": 0})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(R"({"max_video_tokens": 0})"), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad(R"({"resample": 2})"), StatusCode::kUnsupported);
  auto ignored = q3::parse_video_processor_config(R"({"min_pixels": 5, "max_pixels": 7})", "t");
  ASSERT_TRUE(ignored.ok());  // Qwen3VLVideoProcessor ignores top-level min/max_pixels
  EXPECT_EQ(ignored->image.min_pixels, 128 * 32 * 32);
  EXPECT_EQ(ignored->image.max_pixels, 32 * 32 * 768);
  EXPECT_EQ(q3::load_video_processor_config(kDir + "/no_such_dir").status().code(), StatusCode::kNotFound);

  // Processing errors.
  q3::VideoProcessorConfig cfg;
  std::vector<uint8_t> frame(40 * 40 * 3, 9);
  std::vector<const uint8_t*> one = {frame.data()}, two = {frame.data(), frame.data()};
  EXPECT_EQ(q3::process_video({}, 40, 40, cfg).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::process_video(one, 40, 40, cfg).status().code(), StatusCode::kInvalidArgument);  // < T frames
  EXPECT_TRUE(q3::process_video(two, 40, 40, cfg).ok());
  std::vector<const uint8_t*> with_null = {frame.data(), nullptr};
  EXPECT_EQ(q3::process_video(with_null, 40, 40, cfg).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::process_video(two, 0, 40, cfg).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::smart_resize_video(2, 1, 300, 2, 32, 64, 1 << 30).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::sample_frame_indices({0, 30.0}, cfg).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(q3::sample_frame_indices({10, -1.0}, cfg).status().code(), StatusCode::kInvalidArgument);

  // A run of video pads that does not match its (split) frame grid.
  const std::vector<int32_t> ids = {1, 8, 8, 8, 1};
  const q3::VisionGrid g{1, 4, 4};  // one frame needs 4 tokens
  EXPECT_EQ(q3::mrope_positions(ids, {}, std::span<const q3::VisionGrid>(&g, 1), {7, 8, 2}).status().code(),
            StatusCode::kInvalidArgument);
  const q3::VisionGrid bad_grid{0, 4, 4};
  EXPECT_EQ(
      q3::mrope_positions(ids, {}, std::span<const q3::VisionGrid>(&bad_grid, 1), {7, 8, 2}).status().code(),
      StatusCode::kInvalidArgument);
}
