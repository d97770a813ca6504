// Qwen3-VL video preprocessing, matching transformers 5.24's Qwen3VLVideoProcessor (torchvision
// backend; video_processing_qwen3_vl.py) on frames the media layer decoded:
//   sample_frame_indices: which frames of the video to keep (Qwen3VLVideoProcessor.sample_frames);
//   process_video: the video smart_resize (bounds on the *total* pixels t*h*w, sides below the factor
//     scaled up first) -> every frame resized with qwen_vl's torch-exact antialiased bicubic ->
//     normalise + patchify + pad the frame count to temporal_patch_size through qwen_vl::process_video
//     (same layout as Qwen2-VL: rows t, merge blocks, patches in a block; columns c, t, py, px);
//   frame_timestamps: the seconds Qwen3VLProcessor writes before each temporal patch.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "models/qwen_vl/image_processor.h"
#include "models/qwen_vl/processor_config.h"

namespace loom::models::qwen3_vl {

struct VideoProcessorConfig {
  // Resize / patch / normalisation settings. min_pixels / max_pixels hold size.shortest_edge /
  // size.longest_edge, which bound the whole resized video (t_bar * h * w), not one frame.
  qwen_vl::ImageProcessorConfig image = video_defaults();

  // transformers' cap_pixels_per_frame (unset = false, 5.24's default): the video's max_pixels becomes
  //   max(min(max_video_tokens * factor^2, longest_edge // frames), int(shortest_edge * 1.05)) * frames.
  bool cap_pixels_per_frame = false;
  int64_t max_video_tokens = 768;

  // Frame sampling (sample_frame_indices). fps and num_frames are exclusive (transformers raises when
  // both are set); a file's "fps": null clears the class default 2.
  int64_t min_frames = 4;
  int64_t max_frames = 768;
  std::optional<double> fps = 2.0;
  std::optional<int64_t> num_frames;
  bool do_sample_frames = true;

  // Qwen3VLVideoProcessor's class defaults: size {shortest_edge: 128*32*32, longest_edge: 32*32*768},
  // patch_size 16, temporal_patch_size 2, merge_size 2, IMAGENET_STANDARD mean/std (0.5).
  static qwen_vl::ImageProcessorConfig video_defaults();
  // The max_pixels bound for a video of num_frames sampled frames (the cap above, or longest_edge).
  int64_t max_total_pixels(int64_t num_frames) const;
  // InvalidArgument for a bad image part, max_video_tokens < 1, bad min/max_frames, fps <= 0,
  // num_frames < 1, or fps and num_frames both set.
  core::Status validate() const;
};

// Parses one video processor JSON object (video_preprocessor_config.json, preprocessor_config.json, or
// processor_config.json's "video_processor" re-serialised). Missing keys take Qwen3VLVideoProcessor's
// class defaults; a "size" in the file replaces the default size and must give both shortest_edge and
// longest_edge when do_resize is on (transformers raises at resize time). Top-level min_pixels /
// max_pixels are ignored, as Qwen3VLVideoProcessor ignores them. `origin` names it in errors.
core::Expected<VideoProcessorConfig> parse_video_processor_config(const std::string& json_text,
                                                                  const std::string& origin);

// transformers 5's priority order: processor_config.json's "video_processor", else
// video_preprocessor_config.json, else preprocessor_config.json. NotFound when none applies.
core::Expected<VideoProcessorConfig> load_video_processor_config(const std::string& model_dir);

// What the sampler needs to know about the decoded video (transformers' VideoMetadata).
struct VideoMetadata {
  int64_t total_num_frames = 0;
  std::optional<double> fps;  // unknown: transformers assumes 24 (and so do the timestamps)
};

// Qwen3VLVideoProcessor.sample_frames (used when cfg.do_sample_frames; otherwise transformers keeps
// every frame given, i.e. indices 0..n-1, which is also what to pass to frame_timestamps): with fps, n =
// min(max(int(total / video_fps * fps), min_frames), max_frames, total); with num_frames, n = num_frames (not
// clamped: indices repeat when it exceeds the video); with neither, n = min(max(total, min_frames),
// max_frames). Indices are numpy's linspace(0, total - 1, n) rounded half to even. Not rounded to
// temporal_patch_size (5.24 pads the frames later instead). InvalidArgument for total < 1, n < 1, a
// non-positive video fps, or a bad config.
core::Expected<std::vector<int64_t>> sample_frame_indices(const VideoMetadata& meta,
                                                          const VideoProcessorConfig& cfg);

// Qwen3-VL's video smart_resize(num_frames, height, width, temporal_factor, factor, min_pixels,
// max_pixels): sides below factor are scaled up by max(factor/h, factor/w) (truncated) first; then
// h, w rounded half to even to multiples of factor; t_bar = round(frames / temporal_factor) *
// temporal_factor; t_bar*h*w above max_pixels scales down by sqrt(frames*h*w/max_pixels) (floor, at
// least factor), below min_pixels up by sqrt(min_pixels/(frames*h*w)) (ceil). Returns (height, width).
// InvalidArgument when frames < temporal_factor, a size or factor is not positive, or the aspect ratio
// exceeds 200 (all ValueError in transformers).
core::Expected<std::pair<int64_t, int64_t>> smart_resize_video(int64_t num_frames, int64_t height,
                                                               int64_t width, int64_t temporal_factor,
                                                               int64_t factor, int64_t min_pixels,
                                                               int64_t max_pixels);

// frames_rgb: the sampled frames, each [height][width][3] uint8, all one size. Returns pixel_values
// [grid_t * grid_h * grid_w, 3 * T * P * P] f32 and grid_thw = (ceil(frames / T), h / P, w / P); a
// frame count that is not a multiple of T is padded by repeating the last frame. num_threads <= 0
// uses the hardware concurrency. InvalidArgument for no frames, a null frame, a bad size or config,
// fewer frames than temporal_patch_size (with do_resize), or (without do_resize) sides that are not
// multiples of patch_size * merge_size.
core::Expected<qwen_vl::ProcessedImage> process_video(std::span<const uint8_t* const> frames_rgb,
                                                      int32_t width, int32_t height,
                                                      const VideoProcessorConfig& cfg, int num_threads = 0);

// Qwen3VLProcessor._calculate_timestamps: the sampled indices padded with the last one to a multiple
// of temporal_patch_size, index / video_fps each, then per temporal patch the mean of its first and
// last frame's time. One value per grid_t step. Empty for no indices; temporal_patch_size < 1 or
// video_fps <= 0 is a bug of the caller (LOOM_CHECK).
std::vector<double> frame_timestamps(std::span<const int64_t> indices, double video_fps,
                                     int64_t temporal_patch_size);

}  // namespace loom::models::qwen3_vl
