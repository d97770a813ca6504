// Qwen2-VL / Qwen2.5-VL image processor settings, read from a model directory.
//
// Sources, in transformers 5's priority order: processor_config.json's "image_processor" object
// (transformers v5 single-file layout), else preprocessor_config.json (the legacy file).
// Fields (all optional; defaults are Qwen2VLImageProcessor's class defaults):
//   size: {"shortest_edge": min_pixels, "longest_edge": max_pixels}; top-level "min_pixels" /
//   "max_pixels" override size (as Qwen2VLImageProcessor.__init__ does); patch_size,
//   temporal_patch_size, merge_size, image_mean, image_std, rescale_factor, do_resize, do_rescale,
//   do_normalize. A "resample" other than 3 (BICUBIC) is Unsupported.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace loom::models::qwen_vl {

struct ImageProcessorConfig {
  int64_t min_pixels = 56 * 56;         // size.shortest_edge
  int64_t max_pixels = 28 * 28 * 1280;  // size.longest_edge
  int32_t patch_size = 14;
  int32_t temporal_patch_size = 2;
  int32_t merge_size = 2;
  std::array<float, 3> image_mean = {0.48145466f, 0.4578275f, 0.40821073f};  // OPENAI_CLIP_MEAN
  std::array<float, 3> image_std = {0.26862954f, 0.26130258f, 0.27577711f};  // OPENAI_CLIP_STD
  // Kept in double: transformers fuses rescale into normalize as mean * (1 / rescale_factor) with a
  // Python float, and 1 / (1/255 as float) is not 255 exactly.
  double rescale_factor = 1.0 / 255.0;
  bool do_resize = true;
  bool do_rescale = true;
  bool do_normalize = true;

  int64_t factor() const { return static_cast<int64_t>(patch_size) * merge_size; }
  // InvalidArgument for non-positive sizes, min_pixels > max_pixels, zero std.
  core::Status validate() const;
};

// Parses one image processor JSON object (the text of preprocessor_config.json, or the
// "image_processor" value of processor_config.json re-serialised). `origin` names it in errors.
core::Expected<ImageProcessorConfig> parse_image_processor_config(const std::string& json_text,
                                                                  const std::string& origin);

// Reads model_dir as described above. NotFound when neither file (nor the nested section) exists.
core::Expected<ImageProcessorConfig> load_image_processor_config(const std::string& model_dir);

}  // namespace loom::models::qwen_vl
