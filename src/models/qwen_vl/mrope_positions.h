// M-RoPE position ids of Qwen2-VL / Qwen2.5-VL prompts, equal to transformers 5.24's
// Qwen2VLModel.get_rope_index / Qwen2_5_VLModel.get_rope_index for one sequence (attention mask all
// ones), plus the decode positions that follow (compute_3d_position_ids with a cache).
//
// Layout of a prompt, as the processor expands it:
//   text ... <|vision_start|> <|image_pad|> x (t*h*w / merge^2) <|vision_end|> text ...
// Every token has three positions (t, h, w: the three M-RoPE sections):
//   - text token: all three = a running counter `pos` (1-D RoPE), then pos += 1;
//   - a run of image/video pad tokens (one image or one video; the next grid of that modality, in
//     order of appearance): for the merged grid (T = t, H = h/merge, W = w/merge) in row-major
//     (T, H, W) order
//       t = pos + trunc(k * time_interval)   k in [0, T)
//       h = pos + i                          i in [0, H)
//       w = pos + j                          j in [0, W)
//     then pos += max(H, W). NB: transformers 5.24 advances by max(H, W) only, even when the
//     temporal row of a video goes further; the text after a video can therefore repeat temporal
//     positions. We match it (older transformers used max position + 1).
//   - time_interval = 1 for images and for Qwen2-VL videos (tokens_per_second == 0); for Qwen2.5-VL
//     videos tokens_per_second * second_per_grid_t, evaluated in float32 like transformers (the
//     processor hands second_per_grid_ts over as a float32 tensor): e.g. tokens_per_second 25 and
//     2 / (25/7 fps) = 0.56 s per grid give 14 at k = 1, where float64 would give 13.
//   - rope_delta = (max over all three rows) + 1 - number of tokens.
// Decode token at sequence index p >= prompt length: all three positions = p + rope_delta.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace loom::models::qwen_vl {

// grid_thw of one image or video in patches, before spatial merging (what the processor reports).
struct VisionGrid {
  int64_t t, h, w;
};

struct MropeConfig {
  int32_t image_token_id;  // <|image_pad|>
  int32_t video_token_id;  // <|video_pad|>
  // <|vision_start|>. Not consulted: transformers 5.24 finds vision tokens by their own ids
  // (mm_token_type_ids), not by the token after vision_start; kept so the config mirrors config.json.
  int32_t vision_start_token_id;
  int32_t spatial_merge_size = 2;  // vision_config.spatial_merge_size
  // vision_config.tokens_per_second of Qwen2.5-VL; 0 for Qwen2-VL (no temporal scaling of videos).
  double tokens_per_second = 0;
};

// Per input token positions, three rows of equal length; rope_delta as above.
struct MropePositions {
  std::vector<int32_t> t, h, w;
  int64_t rope_delta = 0;
};

// input_ids: one sequence with expanded image/video pad tokens. image_grids / video_grids: one per
// image / video in order of appearance. second_per_grid_ts: one per video (Qwen2.5-VL; empty means
// 1.0 for every video; ignored when cfg.tokens_per_second == 0).
// InvalidArgument when: input_ids is empty; spatial_merge_size < 1; tokens_per_second is negative
// or not finite; a grid has a non-positive side or h/w not divisible by spatial_merge_size; a run of
// pad tokens has no grid left, or its length differs from the grid's t*h*w/merge^2 (two images with
// nothing between them form one run and are rejected, as transformers fails on them too); a grid is
// left unused (transformers ignores it, but its features could not be placed); second_per_grid_ts is
// neither empty nor one per video, or holds a negative / non-finite value.
// OutOfRange when a position does not fit in int32.
core::Expected<MropePositions> mrope_positions(std::span<const int32_t> input_ids,
                                               std::span<const VisionGrid> image_grids,
                                               std::span<const VisionGrid> video_grids,
                                               std::span<const double> second_per_grid_ts,
                                               const MropeConfig& cfg);

// Positions of `count` decode tokens at sequence indices first_index, first_index + 1, ... after a
// prompt with the given rope_delta (first_index is usually the prompt length / cache length): all
// three rows equal index + rope_delta. rope_delta is 0 for text-only prompts.
// InvalidArgument when first_index or count is negative; OutOfRange when a position does not fit in
// int32 or is negative.
core::Expected<MropePositions> mrope_decode_positions(int64_t first_index, int64_t count, int64_t rope_delta);

}  // namespace loom::models::qwen_vl
