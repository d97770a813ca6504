// Qwen2-VL / Qwen2.5-VL video preprocessing, matching transformers 5's Qwen2VLVideoProcessor
// (torchvision backend; AutoVideoProcessor's class for qwen2_vl, qwen2_5_vl and qwen2_5_omni) on
// already-decoded RGB8 frames (frame sampling is the media layer's job; do_sample_frames is off here):
//   per-frame smart_resize bound (optionally capped by a share of the total-video pixel budget) ->
//   each frame resized and normalised exactly like a still image (image_processor.h) ->
//   frame count padded to a multiple of temporal_patch_size by repeating the last frame (as
//   transformers' patchify does) -> patches in [t, h, w] order with temporal_patch_size frames each.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>

#include "core/status.h"
#include "models/qwen_vl/image_processor.h"
#include "models/qwen_vl/processor_config.h"

namespace loom::models::qwen_vl {

struct VideoProcessorConfig {
  // Resize, patch and normalisation settings, shared with the image path. The defaults differ from
  // the image processor's: Qwen2VLVideoProcessor.size is {shortest_edge: 128*28*28,
  // longest_edge: 28*28*768} (the per-frame pixel bounds).
  ImageProcessorConfig image = video_defaults();

  // Total-video budget (transformers' cap_pixels_per_frame; unset in the file means false, the
  // current transformers default): the per-frame max_pixels becomes
  //   max(min(max_pixels, int(max_video_tokens * factor^2 * 0.9) * temporal_patch_size // frames),
  //       int(min_pixels * 1.05)).
  bool cap_pixels_per_frame = false;
  int64_t max_video_tokens = 128000;

  // Frame sampling settings, parsed for the media layer (not used by process_video).
  int64_t min_frames = 4;
  int64_t max_frames = 768;
  std::optional<double> fps;
  std::optional<int64_t> num_frames;
  bool do_sample_frames = false;

  static ImageProcessorConfig video_defaults() {
    ImageProcessorConfig c;
    c.min_pixels = 128 * 28 * 28;
    c.max_pixels = 28 * 28 * 768;
    return c;
  }
  // The per-frame max_pixels for a video of num_frames frames (before temporal padding).
  int64_t frame_max_pixels(int64_t num_frames) const;
  // InvalidArgument for a bad image part, max_video_tokens < 1, or min_frames > max_frames.
  core::Status validate() const;
};

// Parses one video processor JSON object (the text of video_preprocessor_config.json or
// preprocessor_config.json, or the "video_processor" value of processor_config.json re-serialised).
// Missing keys take Qwen2VLVideoProcessor's class defaults. `origin` names it in errors.
core::Expected<VideoProcessorConfig> parse_video_processor_config(const std::string& json_text,
                                                                  const std::string& origin);

// Reads model_dir in transformers 5's priority order: processor_config.json's "video_processor"
// object, else video_preprocessor_config.json, else preprocessor_config.json (Qwen2-VL checkpoints ship
// only that file; the video processor then reads the image settings with its own class defaults).
// NotFound when none applies.
core::Expected<VideoProcessorConfig> load_video_processor_config(const std::string& model_dir);

namespace detail {
// The video processor JSON object of model_dir in the order above and the file it came from (for
// errors); shared with qwen3_vl's video processor. InvalidArgument for a file that is not valid
// JSON, NotFound when none applies.
struct VideoProcessorJson {
  nlohmann::json json;
  std::string origin;
};
core::Expected<VideoProcessorJson> find_video_processor_json(const std::string& model_dir);
// json_text parsed; InvalidArgument "<origin>: not valid JSON" when it is not.
core::Expected<nlohmann::json> parse_json(const std::string& json_text, const std::string& origin);
}  // namespace detail

// frames_rgb: num_frames pointers, each [height][width][3] uint8, all the same size (the media
// layer's decoded, already-sampled frames). Returns pixel_values [grid_t * grid_h * grid_w,
// 3 * T * P * P] f32 with rows ordered t, then merge blocks row-major, then the patches inside a
// block (as process_image), columns c, t, py, px; grid_thw = (ceil(frames / T), h, w);
// num_tokens() is the number of <|video_pad|> tokens (feed it to expand_placeholders).
// A frame count that is not a multiple of T is padded by repeating the last frame, as transformers
// does (it does not raise). num_threads <= 0 uses the hardware concurrency.
// InvalidArgument for no frames, a null frame, a non-positive size, an aspect ratio > 200, a bad
// config, or (with do_resize = false) sides that are not multiples of patch_size * merge_size.
core::Expected<ProcessedImage> process_video(std::span<const uint8_t* const> frames_rgb, int32_t width,
                                             int32_t height, const VideoProcessorConfig& cfg,
                                             int num_threads = 0);

}  // namespace loom::models::qwen_vl
