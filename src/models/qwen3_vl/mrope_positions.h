// M-RoPE position ids of Qwen3-VL prompts: transformers 5.24's Qwen3VLModel.get_rope_index for one
// sequence (attention mask all ones) and the decode positions after it (compute_3d_position_ids with a
// cache).
//
// Qwen3-VL differs from Qwen2-VL / Qwen2.5-VL (qwen_vl/mrope_positions.h) only in how videos are laid
// out: the processor writes each temporal grid step as its own "<t seconds><|vision_start|>
// <|video_pad|>...<|vision_end|>" block, so get_rope_index splits every video grid (t, h, w) into t grids
// (1, h, w) (repeat_interleave, then t := 1) and positions each frame like a one-frame image: temporal
// index 0 (no time interval: the timestamps in the text carry time), h / w offsets from the running
// position, then the position advances by max(h, w) / merge. Images are as in Qwen2-VL. Text tokens
// count up by one; rope_delta = max position + 1 - number of tokens. This is computed by splitting the
// grids and calling qwen_vl::mrope_positions with tokens_per_second = 0 (no temporal scaling), which
// implements exactly that walk.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "models/qwen_vl/mrope_positions.h"

namespace loom::models::qwen3_vl {

using qwen_vl::MropePositions;
using qwen_vl::VisionGrid;

struct MropeConfig {
  int32_t image_token_id;          // <|image_pad|> (config.json image_token_id)
  int32_t video_token_id;          // <|video_pad|> (config.json video_token_id)
  int32_t spatial_merge_size = 2;  // vision_config.spatial_merge_size
};

// video_grids with t > 1 become t grids (1, h, w), in order. InvalidArgument for a grid side < 1 or a
// total frame count over 2^24.
core::Expected<std::vector<VisionGrid>> split_video_grids(std::span<const VisionGrid> video_grids);

// input_ids: one sequence as the processor expanded it (expand_prompt, then tokenised). image_grids /
// video_grids: the processor's image_grid_thw / video_grid_thw (unsplit), in order of appearance.
// Errors as qwen_vl::mrope_positions (a pad-token run whose length does not match its grid -- for
// videos one run per frame --, grids left over or missing, positions beyond int32).
core::Expected<MropePositions> mrope_positions(std::span<const int32_t> input_ids,
                                               std::span<const VisionGrid> image_grids,
                                               std::span<const VisionGrid> video_grids,
                                               const MropeConfig& cfg);

// Decode positions: all three rows = sequence index + rope_delta (qwen_vl::mrope_decode_positions).
core::Expected<MropePositions> mrope_decode_positions(int64_t first_index, int64_t count, int64_t rope_delta);

}  // namespace loom::models::qwen3_vl
