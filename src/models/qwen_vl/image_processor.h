// Qwen2-VL / Qwen2.5-VL image preprocessing, matching transformers 5's default
// Qwen2VLImageProcessor (torchvision backend) on RGB8 input:
//   smart_resize -> antialiased bicubic resize of the uint8 image (resize.h, bit-exact with torch's
//   CPU uint8 kernel) -> fused rescale+normalize in f32 -> patchify with the temporal frame repeated.
// No Python anywhere; multithreaded over rows.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "models/qwen_vl/processor_config.h"

namespace loom::models::qwen_vl {

// transformers' smart_resize: (height, width) rounded (half to even, like Python's round) to
// multiples of factor; when the area exceeds max_pixels both sides are scaled down by
// sqrt(h*w/max_pixels) and floored (at least factor); below min_pixels scaled up and ceiled.
// InvalidArgument when a side is not positive, factor is not positive, or the aspect ratio
// max/min exceeds 200 (transformers raises ValueError there). Returns (height, width).
core::Expected<std::pair<int64_t, int64_t>> smart_resize(int64_t height, int64_t width, int64_t factor,
                                                         int64_t min_pixels, int64_t max_pixels);

// The steps smart_resize shares with qwen3_vl's smart_resize_video (same double arithmetic).
namespace detail {
// InvalidArgument when max(height, width) / min(height, width) > 200; both sides positive.
core::Status check_aspect_ratio(int64_t height, int64_t width);
// round(side / factor) * factor, round() half to even as Python's.
int64_t round_by_factor(int64_t side, int64_t factor);
// max(factor, floor(side / beta / factor) * factor): a side scaled down by beta.
int64_t scaled_down_side(int64_t side, double beta, int64_t factor);
// ceil(side * beta / factor) * factor: a side scaled up by beta.
int64_t scaled_up_side(int64_t side, double beta, int64_t factor);
}  // namespace detail

struct ProcessedImage {
  // [grid_t * grid_h * grid_w, C * T * P * P] f32, C = 3, T = temporal_patch_size, P = patch_size.
  // Row order: merge blocks row-major, then the merge_size x merge_size patches inside a block
  // row-major (so each merge group's patches are adjacent). Column order: c, t, py, px.
  core::Tensor pixel_values;
  std::array<int64_t, 3> grid_thw{};  // (t, h, w) in patches; t = 1 for a still image
  int64_t merge_size = 2;

  // Placeholder tokens this image takes in the prompt: t * h * w / merge_size^2.
  int64_t num_tokens() const { return grid_thw[0] * grid_thw[1] * grid_thw[2] / (merge_size * merge_size); }
};

// rgb: [height][width][3] uint8 (the media layer's decoded image). num_threads <= 0 uses the
// hardware concurrency. InvalidArgument for null/empty input, a bad config, an aspect ratio > 200,
// or (with do_resize = false) sides that are not multiples of patch_size * merge_size.
core::Expected<ProcessedImage> process_image(const uint8_t* rgb, int32_t width, int32_t height,
                                             const ImageProcessorConfig& cfg, int num_threads = 0);

// Placeholder expansion, as Qwen2VLProcessor does on the prompt text: the i-th occurrence of
// `pad_token` (e.g. "<|image_pad|>") becomes counts[i] copies of it. InvalidArgument when the number
// of occurrences differs from counts.size().
core::Expected<std::string> expand_placeholders(const std::string& text, const std::string& pad_token,
                                                const std::vector<int64_t>& counts);

// The same on token ids: the i-th `pad_id` becomes counts[i] copies.
core::Expected<std::vector<int32_t>> expand_placeholder_ids(const std::vector<int32_t>& ids, int32_t pad_id,
                                                            const std::vector<int64_t>& counts);

}  // namespace loom::models::qwen_vl
