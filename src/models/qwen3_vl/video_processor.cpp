// Qwen3-VL video preprocessing (see video_processor.h for the transformers functions mirrored).
#include "models/qwen3_vl/video_processor.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "models/qwen_vl/processor_json.h"
#include "models/qwen_vl/resize.h"
#include "models/qwen_vl/video_processor.h"

namespace loom::models::qwen3_vl {
namespace {

using Json = nlohmann::json;
using qwen_vl::detail::read_bool;
using qwen_vl::detail::read_int;

bool has_value(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

core::Expected<VideoProcessorConfig> from_json(const Json& j, const std::string& origin) {
  if (!j.is_object())
    return core::invalid_argument(origin + ": video processor config must be a JSON object");
  VideoProcessorConfig c;
  const qwen_vl::ImageProcessorConfig defaults = VideoProcessorConfig::video_defaults();

  // size: the file's dict replaces the class default as a whole (transformers does not merge them).
  int64_t shortest = defaults.min_pixels;
  int64_t longest = defaults.max_pixels;
  if (has_value(j, "size")) {
    const Json& s = j["size"];
    if (!s.is_object()) return core::invalid_argument(origin + ": \"size\" must be an object");
    shortest = 0;
    longest = 0;
    LOOM_RETURN_IF_ERROR(read_int(s, "shortest_edge", origin, &shortest));
    LOOM_RETURN_IF_ERROR(read_int(s, "longest_edge", origin, &longest));
    bool do_resize = true;
    LOOM_RETURN_IF_ERROR(read_bool(j, "do_resize", origin, &do_resize));
    // Qwen3VLVideoProcessor.resize raises ValueError on a missing (or zero) bound.
    if (do_resize && (shortest == 0 || longest == 0))
      return core::invalid_argument(origin + ": \"size\" must give both shortest_edge and longest_edge");
    // Unused without resizing; fill so that validation passes.
    if (shortest == 0) shortest = 1;
    if (longest == 0) longest = std::numeric_limits<int64_t>::max();
  }

  // The rest of the image part through qwen_vl's parser, with this class's defaults filled in and the
  // keys it must not see removed (Qwen2VL's top-level min/max_pixels override does not apply here).
  Json k = j;
  k.erase("size");
  k.erase("min_pixels");
  k.erase("max_pixels");
  if (!has_value(k, "patch_size")) k["patch_size"] = defaults.patch_size;
  if (!has_value(k, "temporal_patch_size")) k["temporal_patch_size"] = defaults.temporal_patch_size;
  if (!has_value(k, "merge_size")) k["merge_size"] = defaults.merge_size;
  if (!has_value(k, "image_mean")) k["image_mean"] = defaults.image_mean;
  if (!has_value(k, "image_std")) k["image_std"] = defaults.image_std;
  LOOM_ASSIGN_OR_RETURN(c.image, qwen_vl::parse_image_processor_config(k.dump(), origin));
  c.image.min_pixels = shortest;
  c.image.max_pixels = longest;

  LOOM_RETURN_IF_ERROR(read_bool(j, "cap_pixels_per_frame", origin, &c.cap_pixels_per_frame));
  LOOM_RETURN_IF_ERROR(read_int(j, "max_video_tokens", origin, &c.max_video_tokens));
  LOOM_RETURN_IF_ERROR(read_int(j, "min_frames", origin, &c.min_frames));
  LOOM_RETURN_IF_ERROR(read_int(j, "max_frames", origin, &c.max_frames));
  LOOM_RETURN_IF_ERROR(read_bool(j, "do_sample_frames", origin, &c.do_sample_frames));
  if (auto it = j.find("fps"); it != j.end()) {
    if (it->is_null()) {
      c.fps.reset();
    } else {
      if (!it->is_number()) return core::invalid_argument(origin + ": \"fps\" must be a number");
      c.fps = it->get<double>();
    }
  }
  if (has_value(j, "num_frames")) {
    int64_t n = 0;
    LOOM_RETURN_IF_ERROR(read_int(j, "num_frames", origin, &n));
    c.num_frames = n;
  }
  LOOM_RETURN_IF_ERROR(c.validate().with_context(origin));
  return c;
}

// numpy.linspace(0, stop, num)[i] as numpy computes it (stop >= 0, num >= 1): i * (stop / (num - 1)),
// the last element exactly stop; num == 1 gives 0. A zero step takes numpy's i / div * delta branch,
// which is 0 here as well.
double linspace_at(double stop, int64_t num, int64_t i) {
  if (num == 1) return 0.0;
  if (i == num - 1) return stop;
  const double step = stop / static_cast<double>(num - 1);
  return static_cast<double>(i) * step;
}

}  // namespace

qwen_vl::ImageProcessorConfig VideoProcessorConfig::video_defaults() {
  qwen_vl::ImageProcessorConfig c;
  c.min_pixels = 128 * 32 * 32;
  c.max_pixels = 32 * 32 * 768;
  c.patch_size = 16;
  c.temporal_patch_size = 2;
  c.merge_size = 2;
  c.image_mean = {0.5f, 0.5f, 0.5f};  // IMAGENET_STANDARD_MEAN
  c.image_std = {0.5f, 0.5f, 0.5f};   // IMAGENET_STANDARD_STD
  return c;
}

int64_t VideoProcessorConfig::max_total_pixels(int64_t num_frames) const {
  if (!cap_pixels_per_frame || num_frames <= 0) return image.max_pixels;
  const int64_t f = image.factor();
  const int64_t frame_cap = max_video_tokens * f * f;
  const int64_t share = image.max_pixels / num_frames;  // Python //, both positive
  // int(shortest_edge * 1.05): one double multiply, truncated.
  const auto floor_pixels = static_cast<int64_t>(static_cast<double>(image.min_pixels) * 1.05);
  const int64_t per_frame = std::max(std::min(frame_cap, share), floor_pixels);
  if (per_frame > std::numeric_limits<int64_t>::max() / num_frames)
    return std::numeric_limits<int64_t>::max();
  return per_frame * num_frames;
}

core::Status VideoProcessorConfig::validate() const {
  LOOM_RETURN_IF_ERROR(image.validate());
  if (max_video_tokens < 1) return core::invalid_argument("max_video_tokens must be positive");
  if (max_video_tokens > (int64_t{1} << 40) / std::max<int64_t>(1, image.factor() * image.factor()))
    return core::invalid_argument("max_video_tokens is too large");
  if (min_frames < 0 || max_frames < 1 || min_frames > max_frames)
    return core::invalid_argument("min_frames/max_frames out of range");
  if (fps && !(*fps > 0.0 && std::isfinite(*fps))) return core::invalid_argument("fps must be positive");
  if (num_frames && *num_frames < 1) return core::invalid_argument("num_frames must be positive");
  if (fps && num_frames)
    return core::invalid_argument(
        "fps and num_frames are mutually exclusive (set \"fps\": null to use num_frames)");
  return core::Status::ok_status();
}

core::Expected<VideoProcessorConfig> parse_video_processor_config(const std::string& json_text,
                                                                  const std::string& origin) {
  LOOM_ASSIGN_OR_RETURN(Json j, qwen_vl::detail::parse_json(json_text, origin));
  return from_json(j, origin);
}

core::Expected<VideoProcessorConfig> load_video_processor_config(const std::string& model_dir) {
  LOOM_ASSIGN_OR_RETURN(qwen_vl::detail::VideoProcessorJson found,
                        qwen_vl::detail::find_video_processor_json(model_dir));
  return from_json(found.json, found.origin);
}

core::Expected<std::vector<int64_t>> sample_frame_indices(const VideoMetadata& meta,
                                                          const VideoProcessorConfig& cfg) {
  LOOM_RETURN_IF_ERROR(cfg.validate());
  const int64_t total = meta.total_num_frames;
  if (total < 1) return core::invalid_argument("sample_frame_indices: the video has no frames");
  int64_t n = 0;
  if (cfg.num_frames) {
    n = *cfg.num_frames;
  } else if (cfg.fps) {
    // transformers falls back to 24 fps when the video's rate is unknown.
    const double video_fps = meta.fps.value_or(24.0);
    if (!(video_fps > 0.0) || !std::isfinite(video_fps))
      return core::invalid_argument("sample_frame_indices: video fps must be positive, got " +
                                    std::to_string(video_fps));
    // Python: int(total / metadata.fps * fps), truncation of a non-negative double.
    const double want = static_cast<double>(total) / video_fps * *cfg.fps;
    if (!(want < 9.0e18)) return core::invalid_argument("sample_frame_indices: frame count overflows");
    n = static_cast<int64_t>(want);
    n = std::min({std::max(n, cfg.min_frames), cfg.max_frames, total});
  } else {
    n = std::min(std::max(total, cfg.min_frames), cfg.max_frames);
  }
  if (n < 1) return core::invalid_argument("sample_frame_indices: no frames to sample");
  if (n > (int64_t{1} << 24))
    return core::invalid_argument("sample_frame_indices: " + std::to_string(n) + " frames is too many");
  std::vector<int64_t> out(static_cast<size_t>(n));
  const auto stop = static_cast<double>(total - 1);
  // .round() is half to even, as std::nearbyint in the default rounding mode.
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = static_cast<int64_t>(std::nearbyint(linspace_at(stop, n, i)));
  return out;
}

core::Expected<std::pair<int64_t, int64_t>> smart_resize_video(int64_t num_frames, int64_t height,
                                                               int64_t width, int64_t temporal_factor,
                                                               int64_t factor, int64_t min_pixels,
                                                               int64_t max_pixels) {
  if (temporal_factor < 1 || factor < 1)
    return core::invalid_argument("smart_resize_video: temporal_factor and factor must be positive");
  if (num_frames < temporal_factor)
    return core::invalid_argument("video of " + std::to_string(num_frames) +
                                  " frames is shorter than temporal_patch_size " +
                                  std::to_string(temporal_factor));
  if (height <= 0 || width <= 0)
    return core::invalid_argument("video frame size " + std::to_string(width) + "x" + std::to_string(height) +
                                  " must be positive");
  if (min_pixels <= 0 || max_pixels <= 0)
    return core::invalid_argument("smart_resize_video: min_pixels and max_pixels must be positive");
  if (height < factor || width < factor) {
    // Python: scale = max(factor / height, factor / width); int(side * scale).
    const double scale = std::max(static_cast<double>(factor) / static_cast<double>(height),
                                  static_cast<double>(factor) / static_cast<double>(width));
    height = static_cast<int64_t>(static_cast<double>(height) * scale);
    width = static_cast<int64_t>(static_cast<double>(width) * scale);
    if (height <= 0 || width <= 0)
      return core::invalid_argument("absolute aspect ratio must be smaller than 200");
  }
  LOOM_RETURN_IF_ERROR(qwen_vl::detail::check_aspect_ratio(height, width));
  const double frames = static_cast<double>(num_frames);
  int64_t h_bar = qwen_vl::detail::round_by_factor(height, factor);
  int64_t w_bar = qwen_vl::detail::round_by_factor(width, factor);
  // round(): half to even, as std::nearbyint in the default rounding mode.
  const int64_t t_bar =
      static_cast<int64_t>(std::nearbyint(frames / static_cast<double>(temporal_factor))) * temporal_factor;
  // Python ints do not overflow; the products here stay far below 2^63 for sides under 2^20.
  if (height > (1 << 20) || width > (1 << 20) || num_frames > (1 << 20))
    return core::invalid_argument("smart_resize_video: video too large");
  const int64_t volume = t_bar * h_bar * w_bar;
  if (volume > max_pixels) {
    // Python: math.sqrt((num_frames * height * width) / max_pixels), an int product then true division.
    const double beta =
        std::sqrt(static_cast<double>(num_frames * height * width) / static_cast<double>(max_pixels));
    h_bar = qwen_vl::detail::scaled_down_side(height, beta, factor);
    w_bar = qwen_vl::detail::scaled_down_side(width, beta, factor);
  } else if (volume < min_pixels) {
    const double beta =
        std::sqrt(static_cast<double>(min_pixels) / static_cast<double>(num_frames * height * width));
    h_bar = qwen_vl::detail::scaled_up_side(height, beta, factor);
    w_bar = qwen_vl::detail::scaled_up_side(width, beta, factor);
  }
  return std::make_pair(h_bar, w_bar);
}

core::Expected<qwen_vl::ProcessedImage> process_video(std::span<const uint8_t* const> frames_rgb,
                                                      int32_t width, int32_t height,
                                                      const VideoProcessorConfig& cfg, int num_threads) {
  LOOM_RETURN_IF_ERROR(cfg.validate());
  const auto n = static_cast<int64_t>(frames_rgb.size());
  if (n == 0) return core::invalid_argument("process_video: no frames");
  for (int64_t i = 0; i < n; ++i)
    if (frames_rgb[static_cast<size_t>(i)] == nullptr)
      return core::invalid_argument("process_video: frame " + std::to_string(i) + " is null");
  if (width <= 0 || height <= 0)
    return core::invalid_argument("process_video: frame size " + std::to_string(width) + "x" +
                                  std::to_string(height) + " must be positive");

  // Resize here (the video smart_resize differs from the image one), then hand the frames to
  // qwen_vl::process_video with resizing off: it normalises, pads to T and patchifies exactly as
  // Qwen3VLVideoProcessor (same fused rescale+normalize, same patch permutation).
  int64_t out_h = height, out_w = width;
  std::vector<std::vector<uint8_t>> resized;
  std::vector<const uint8_t*> ptrs(frames_rgb.begin(), frames_rgb.end());
  if (cfg.image.do_resize) {
    LOOM_ASSIGN_OR_RETURN(
        auto hw, smart_resize_video(n, height, width, cfg.image.temporal_patch_size, cfg.image.factor(),
                                    cfg.image.min_pixels, cfg.max_total_pixels(n)));
    out_h = hw.first;
    out_w = hw.second;
    if (out_h > (1 << 15) || out_w > (1 << 15))
      return core::out_of_range("process_video: resized frames " + std::to_string(out_w) + "x" +
                                std::to_string(out_h) + " are too large");
    // torchvision returns the frames untouched when the size does not change.
    if (out_h != height || out_w != width) {
      resized.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        resized.push_back(qwen_vl::resize_bicubic_aa_u8(ptrs[static_cast<size_t>(i)], width, height, 3,
                                                        static_cast<int32_t>(out_w),
                                                        static_cast<int32_t>(out_h), num_threads));
        ptrs[static_cast<size_t>(i)] = resized.back().data();
      }
    }
  }
  qwen_vl::VideoProcessorConfig patch_cfg;
  patch_cfg.image = cfg.image;
  patch_cfg.image.do_resize = false;
  patch_cfg.image.min_pixels = 1;
  patch_cfg.image.max_pixels = std::numeric_limits<int64_t>::max();
  patch_cfg.cap_pixels_per_frame = false;
  return qwen_vl::process_video(ptrs, static_cast<int32_t>(out_w), static_cast<int32_t>(out_h), patch_cfg,
                                num_threads);
}

std::vector<double> frame_timestamps(std::span<const int64_t> indices, double video_fps,
                                     int64_t temporal_patch_size) {
  LOOM_CHECK(temporal_patch_size >= 1) << "temporal_patch_size " << temporal_patch_size;
  LOOM_CHECK(video_fps > 0.0) << "video fps " << video_fps;
  std::vector<double> out;
  if (indices.empty()) return out;
  const auto n = static_cast<int64_t>(indices.size());
  const int64_t padded = (n + temporal_patch_size - 1) / temporal_patch_size * temporal_patch_size;
  auto seconds = [&](int64_t i) {
    const int64_t idx = indices[static_cast<size_t>(std::min(i, n - 1))];  // padding repeats the last
    return static_cast<double>(idx) / video_fps;
  };
  for (int64_t i = 0; i < padded; i += temporal_patch_size)
    out.push_back((seconds(i) + seconds(i + temporal_patch_size - 1)) / 2.0);
  return out;
}

}  // namespace loom::models::qwen3_vl
