#include "models/qwen_vl/video_processor.h"

#include "models/qwen_vl/processor_json.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

namespace loom::models::qwen_vl {
namespace {

using Json = nlohmann::json;
using detail::read_bool;
using detail::read_int;

bool has_value(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

core::Expected<VideoProcessorConfig> from_json(Json j, const std::string& origin) {
  if (!j.is_object())
    return core::invalid_argument(origin + ": video processor config must be a JSON object");
  VideoProcessorConfig c;
  // The shared image part is parsed by the image loader; it must see the video class defaults for
  // size, which replace (not merge with) a "size" given in the file, as in transformers.
  if (!has_value(j, "size")) {
    j["size"] = {{"shortest_edge", c.image.min_pixels}, {"longest_edge", c.image.max_pixels}};
  } else if (j["size"].is_object()) {
    const Json& s = j["size"];
    const bool has_min =
        has_value(s, "shortest_edge") || has_value(s, "min_pixels") || has_value(j, "min_pixels");
    const bool has_max =
        has_value(s, "longest_edge") || has_value(s, "max_pixels") || has_value(j, "max_pixels");
    bool do_resize = true;
    LOOM_RETURN_IF_ERROR(read_bool(j, "do_resize", origin, &do_resize));
    // transformers' Qwen2VLVideoProcessor.resize raises ValueError here.
    if (do_resize && !(has_min && has_max))
      return core::invalid_argument(origin + ": \"size\" must give both shortest_edge and longest_edge");
    // Without resizing the bounds are unused; fill a missing one so that validation passes.
    if (!has_min) j["size"]["shortest_edge"] = 1;
    if (!has_max) j["size"]["longest_edge"] = std::numeric_limits<int64_t>::max();
  }
  LOOM_ASSIGN_OR_RETURN(c.image, parse_image_processor_config(j.dump(), origin));
  LOOM_RETURN_IF_ERROR(read_bool(j, "cap_pixels_per_frame", origin, &c.cap_pixels_per_frame));
  LOOM_RETURN_IF_ERROR(read_int(j, "max_video_tokens", origin, &c.max_video_tokens));
  LOOM_RETURN_IF_ERROR(read_int(j, "min_frames", origin, &c.min_frames));
  LOOM_RETURN_IF_ERROR(read_int(j, "max_frames", origin, &c.max_frames));
  LOOM_RETURN_IF_ERROR(read_bool(j, "do_sample_frames", origin, &c.do_sample_frames));
  if (has_value(j, "fps")) {
    if (!j["fps"].is_number()) return core::invalid_argument(origin + ": \"fps\" must be a number");
    c.fps = j["fps"].get<double>();
  }
  if (has_value(j, "num_frames")) {
    int64_t n = 0;
    LOOM_RETURN_IF_ERROR(read_int(j, "num_frames", origin, &n));
    c.num_frames = n;
  }
  LOOM_RETURN_IF_ERROR(c.validate().with_context(origin));
  return c;
}

}  // namespace

int64_t VideoProcessorConfig::frame_max_pixels(int64_t num_frames) const {
  if (!cap_pixels_per_frame || num_frames <= 0) return image.max_pixels;
  const int64_t f = image.factor();
  // Python: int(max_video_tokens * factor * factor * 0.9); the product is an int, then one float
  // multiply, then truncation; the same double operations here.
  const auto total_pixels = static_cast<int64_t>(static_cast<double>(max_video_tokens * f * f) * 0.9);
  const int64_t share = total_pixels * image.temporal_patch_size / num_frames;  // positive: floor division
  const auto floor_pixels = static_cast<int64_t>(static_cast<double>(image.min_pixels) * 1.05);
  return std::max(std::min(image.max_pixels, share), floor_pixels);
}

core::Status VideoProcessorConfig::validate() const {
  LOOM_RETURN_IF_ERROR(image.validate());
  if (max_video_tokens < 1) return core::invalid_argument("max_video_tokens must be positive");
  if (min_frames < 0 || max_frames < 1 || min_frames > max_frames)
    return core::invalid_argument("min_frames/max_frames out of range");
  if (fps && !(*fps > 0.0)) return core::invalid_argument("fps must be positive");
  if (num_frames && *num_frames < 1) return core::invalid_argument("num_frames must be positive");
  return core::Status::ok_status();
}

core::Expected<VideoProcessorConfig> parse_video_processor_config(const std::string& json_text,
                                                                  const std::string& origin) {
  LOOM_ASSIGN_OR_RETURN(Json j, detail::parse_json(json_text, origin));
  return from_json(std::move(j), origin);
}

core::Expected<VideoProcessorConfig> load_video_processor_config(const std::string& model_dir) {
  LOOM_ASSIGN_OR_RETURN(detail::VideoProcessorJson found, detail::find_video_processor_json(model_dir));
  return from_json(std::move(found.json), found.origin);
}

namespace detail {

core::Expected<Json> parse_json(const std::string& json_text, const std::string& origin) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::invalid_argument(origin + ": not valid JSON");
  return j;
}

core::Expected<VideoProcessorJson> find_video_processor_json(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path nested = dir / "processor_config.json";
  if (fs::exists(nested)) {
    LOOM_ASSIGN_OR_RETURN(std::string text, read_file(nested));
    LOOM_ASSIGN_OR_RETURN(Json j, parse_json(text, nested.string()));
    if (j.is_object()) {
      if (auto it = j.find("video_processor"); it != j.end())
        return VideoProcessorJson{std::move(*it), nested.string()};
    }
  }
  for (const char* name : {"video_preprocessor_config.json", "preprocessor_config.json"}) {
    const fs::path p = dir / name;
    if (!fs::exists(p)) continue;
    LOOM_ASSIGN_OR_RETURN(std::string text, read_file(p));
    LOOM_ASSIGN_OR_RETURN(Json j, parse_json(text, p.string()));
    return VideoProcessorJson{std::move(j), p.string()};
  }
  return core::not_found(
      model_dir +
      ": no \"video_processor\" in processor_config.json, no video_preprocessor_config.json "
      "and no preprocessor_config.json");
}

}  // namespace detail

core::Expected<ProcessedImage> process_video(std::span<const uint8_t* const> frames_rgb, int32_t width,
                                             int32_t height, const VideoProcessorConfig& cfg,
                                             int num_threads) {
  LOOM_RETURN_IF_ERROR(cfg.validate());
  const auto n = static_cast<int64_t>(frames_rgb.size());
  if (n == 0) return core::invalid_argument("process_video: no frames");
  for (int64_t i = 0; i < n; ++i)
    if (frames_rgb[static_cast<size_t>(i)] == nullptr)
      return core::invalid_argument("process_video: frame " + std::to_string(i) + " is null");

  // Each frame goes through the still-image path with one temporal slot, under the video's
  // per-frame pixel bound; process_image then resizes to the same size for every frame.
  ImageProcessorConfig frame_cfg = cfg.image;
  frame_cfg.temporal_patch_size = 1;
  frame_cfg.max_pixels = cfg.frame_max_pixels(n);
  LOOM_RETURN_IF_ERROR(frame_cfg.validate());

  const int64_t t_len = cfg.image.temporal_patch_size;
  const int64_t grid_t = (n + t_len - 1) / t_len;  // padded with copies of the last frame
  const int64_t pp = static_cast<int64_t>(cfg.image.patch_size) * cfg.image.patch_size;
  ProcessedImage out;
  int64_t spatial = 0;  // grid_h * grid_w
  float* dst = nullptr;
  core::Tensor last;  // the last real frame's patches: [spatial, 3 * pp], columns c, py, px
  for (int64_t f = 0; f < grid_t * t_len; ++f) {
    if (f < n) {
      LOOM_ASSIGN_OR_RETURN(ProcessedImage frame, process_image(frames_rgb[static_cast<size_t>(f)], width,
                                                                height, frame_cfg, num_threads));
      if (f == 0) {
        spatial = frame.grid_thw[1] * frame.grid_thw[2];
        out.pixel_values = core::Tensor::empty({grid_t * spatial, 3 * t_len * pp}, core::DType::kF32);
        out.grid_thw = {grid_t, frame.grid_thw[1], frame.grid_thw[2]};
        out.merge_size = cfg.image.merge_size;
        dst = out.pixel_values.data_as<float>();
      }
      LOOM_CHECK(frame.grid_thw[1] * frame.grid_thw[2] == spatial) << "frames resized to different sizes";
      last = std::move(frame.pixel_values);
    }
    // Scatter: video row (t, r), column block (c, tt) <- frame f = t * T + tt, row r, block c.
    const int64_t t = f / t_len;
    const int64_t tt = f % t_len;
    const float* src = last.data_as<float>();
    for (int64_t r = 0; r < spatial; ++r) {
      float* row = dst + ((t * spatial + r) * 3 * t_len) * pp;
      for (int64_t c = 0; c < 3; ++c)
        std::memcpy(row + (c * t_len + tt) * pp, src + (r * 3 + c) * pp,
                    static_cast<size_t>(pp) * sizeof(float));
    }
  }
  return out;
}

}  // namespace loom::models::qwen_vl
