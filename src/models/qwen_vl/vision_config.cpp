#include "models/qwen_vl/vision_config.h"

#include <algorithm>

#include "models/vision_common.h"

namespace loom::models::qwen_vl {

bool VisionConfig::is_full_attention(int64_t block) const {
  return std::find(fullatt_block_indexes.begin(), fullatt_block_indexes.end(), block) !=
         fullatt_block_indexes.end();
}

core::Expected<VisionConfig> parse_vision_config(const nlohmann::json& j) {
  if (!j.is_object()) return core::invalid_argument("vision_config must be a JSON object");
  VisionConfig c;
  config_detail::FieldReader r;
  c.in_channels = r.int_or(j, "vision_config", "in_chans", c.in_channels);  // older Qwen2.5-VL checkpoints
  vision::read_common_fields(r, j, c);
  c.window_size = r.int_or(j, "vision_config", "window_size", c.window_size);
  c.fullatt_block_indexes =
      r.opt_int_list(j, "vision_config", "fullatt_block_indexes").value_or(c.fullatt_block_indexes);
  LOOM_RETURN_IF_ERROR(vision::read_rope_theta(r, j, c.rope_theta));
  if (!r.ok()) return r.status();

  LOOM_RETURN_IF_ERROR(vision::check_common_fields(c));
  if (c.window_size <= 0) {
    return core::invalid_argument("vision_config.window_size must be positive, got " +
                                  std::to_string(c.window_size));
  }
  if (c.window_units() < 1) {
    return core::invalid_argument("vision_config.window_size " + std::to_string(c.window_size) +
                                  " is smaller than spatial_merge_size * patch_size");
  }
  LOOM_RETURN_IF_ERROR(vision::check_block_indexes(c.fullatt_block_indexes, c.depth, "fullatt_block_indexes",
                                                   /*distinct=*/false));
  if (!(c.rope_theta > 0)) return core::invalid_argument("vision rope_theta must be positive");
  if (c.hidden_act != "silu") {
    return core::unsupported("vision_config.hidden_act \"" + c.hidden_act +
                             "\" (only \"silu\" is supported)");
  }
  return c;
}

}  // namespace loom::models::qwen_vl
