// Qwen3-VL processor: settings of both sub-processors and the prompt's placeholder expansion, as
// transformers 5.24's Qwen3VLProcessor (processing_qwen3_vl.py) builds the text before tokenising.
//
// Images: the image processor is Qwen2VLImageProcessor (AutoImageProcessor's class for qwen3_vl), so
// images go through qwen_vl::process_image with the checkpoint's settings (patch_size 16, mean/std 0.5
// in Qwen3-VL's shipped preprocessor_config.json); each "<|image_pad|>" becomes t*h*w/merge^2 copies.
// Videos: each "<|video_pad|>" becomes, for every temporal grid step k,
//   "<{timestamps[k]:.1f} seconds>" + "<|vision_start|>" + "<|video_pad|>" x (h*w/merge^2) + "<|vision_end|>"
// The chat template already wraps the video in <|vision_start|> ... <|vision_end|>, so the expanded
// text nests them: "<|vision_start|><0.3 seconds><|vision_start|><|video_pad|>...<|vision_end|>...
// <|vision_end|>" -- exactly what transformers produces.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/qwen3_vl/video_processor.h"
#include "models/qwen_vl/processor_config.h"

namespace loom::models::qwen3_vl {

// The placeholder strings (Qwen3VLProcessor's defaults when the tokenizer does not name them).
struct PlaceholderTokens {
  std::string image_pad = "<|image_pad|>";
  std::string video_pad = "<|video_pad|>";
  std::string vision_start = "<|vision_start|>";
  std::string vision_end = "<|vision_end|>";
};

struct ProcessorConfig {
  qwen_vl::ImageProcessorConfig image;  // Qwen2VLImageProcessor settings (qwen_vl's loader)
  VideoProcessorConfig video;           // Qwen3VLVideoProcessor settings
};

// Both parts from a model directory, each in transformers 5's file priority order (see
// qwen_vl::load_image_processor_config and load_video_processor_config). NotFound when a part has no file.
core::Expected<ProcessorConfig> load_processor_config(const std::string& model_dir);

// One video as the prompt sees it: its grid (in patches, before merging) and the timestamps of its
// temporal grid steps (frame_timestamps(); one per grid_thw[0]).
struct VideoPrompt {
  std::array<int64_t, 3> grid_thw{};
  std::vector<double> timestamps;
};

// Python's f"<{t:.1f} seconds>" (correctly rounded from the binary value, as printf's %.1f).
std::string format_timestamp(double seconds);

// The replacement for one "<|video_pad|>". InvalidArgument when timestamps.size() != grid_thw[0], a
// side is not positive, or h*w is not a multiple of merge_size^2.
core::Expected<std::string> video_placeholder(const VideoPrompt& video, int64_t merge_size,
                                              const PlaceholderTokens& tokens = {});

// Replaces, left to right, the i-th "<|image_pad|>" with image_tokens[i] copies of it and the i-th
// "<|video_pad|>" with video_placeholder(videos[i]) (ProcessorMixin.get_text_with_replacements; the
// inserted text is not scanned again). image_merge_size / video_merge_size are the two processors'
// merge_size. InvalidArgument when the number of pads of a kind differs from the items given (the
// processor raises too), or as video_placeholder.
core::Expected<std::string> expand_prompt(const std::string& text,
                                          const std::vector<std::array<int64_t, 3>>& image_grids,
                                          const std::vector<VideoPrompt>& videos, int64_t image_merge_size,
                                          int64_t video_merge_size, const PlaceholderTokens& tokens = {});

}  // namespace loom::models::qwen3_vl
