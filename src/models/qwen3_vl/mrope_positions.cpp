// Qwen3-VL M-RoPE position ids (see mrope_positions.h).
#include "models/qwen3_vl/mrope_positions.h"

#include <string>

namespace loom::models::qwen3_vl {

core::Expected<std::vector<VisionGrid>> split_video_grids(std::span<const VisionGrid> video_grids) {
  std::vector<VisionGrid> out;
  int64_t total = 0;
  for (size_t i = 0; i < video_grids.size(); ++i) {
    const VisionGrid& g = video_grids[i];
    if (g.t < 1 || g.h < 1 || g.w < 1)
      return core::invalid_argument("video grid " + std::to_string(i) + " (" + std::to_string(g.t) + ", " +
                                    std::to_string(g.h) + ", " + std::to_string(g.w) +
                                    "): every side must be positive");
    total += g.t;
    if (total > (int64_t{1} << 24)) return core::invalid_argument("video grids: too many frames");
    out.insert(out.end(), static_cast<size_t>(g.t), VisionGrid{1, g.h, g.w});
  }
  return out;
}

core::Expected<MropePositions> mrope_positions(std::span<const int32_t> input_ids,
                                               std::span<const VisionGrid> image_grids,
                                               std::span<const VisionGrid> video_grids,
                                               const MropeConfig& cfg) {
  LOOM_ASSIGN_OR_RETURN(const std::vector<VisionGrid> frames, split_video_grids(video_grids));
  qwen_vl::MropeConfig qcfg{};
  qcfg.image_token_id = cfg.image_token_id;
  qcfg.video_token_id = cfg.video_token_id;
  qcfg.vision_start_token_id = -1;  // not consulted
  qcfg.spatial_merge_size = cfg.spatial_merge_size;
  qcfg.tokens_per_second = 0;  // time_interval 1 on a temporal extent of 1: index 0 for every frame
  return qwen_vl::mrope_positions(input_ids, image_grids, frames, {}, qcfg);
}

core::Expected<MropePositions> mrope_decode_positions(int64_t first_index, int64_t count,
                                                      int64_t rope_delta) {
  return qwen_vl::mrope_decode_positions(first_index, count, rope_delta);
}

}  // namespace loom::models::qwen3_vl
