#include "models/qwen3_vl/vision_config.h"

#include <algorithm>
#include <string>

#include "models/vision_common.h"

namespace loom::models::qwen3_vl {

int64_t VisionConfig::num_grid_per_side() const {
  int64_t side = 0;
  while ((side + 1) * (side + 1) <= num_position_embeddings) ++side;
  return side;
}

int64_t VisionConfig::deepstack_slot(int64_t block) const {
  auto it = std::find(deepstack_visual_indexes.begin(), deepstack_visual_indexes.end(), block);
  return it == deepstack_visual_indexes.end() ? -1 : it - deepstack_visual_indexes.begin();
}

core::Expected<VisionConfig> parse_vision_config(const nlohmann::json& j) {
  if (!j.is_object()) return core::invalid_argument("vision_config must be a JSON object");
  VisionConfig c;
  config_detail::FieldReader r;
  vision::read_common_fields(r, j, c);
  c.num_position_embeddings =
      r.int_or(j, "vision_config", "num_position_embeddings", c.num_position_embeddings);
  c.deepstack_visual_indexes =
      r.opt_int_list(j, "vision_config", "deepstack_visual_indexes").value_or(c.deepstack_visual_indexes);
  LOOM_RETURN_IF_ERROR(vision::read_rope_theta(r, j, c.rope_theta));
  if (!r.ok()) return r.status();

  LOOM_RETURN_IF_ERROR(vision::check_common_fields(c));
  if (c.num_position_embeddings <= 0) {
    return core::invalid_argument("vision_config.num_position_embeddings must be positive, got " +
                                  std::to_string(c.num_position_embeddings));
  }
  LOOM_RETURN_IF_ERROR(vision::check_block_indexes(c.deepstack_visual_indexes, c.depth,
                                                   "deepstack_visual_indexes", /*distinct=*/true));
  if (!(c.rope_theta > 0)) return core::invalid_argument("vision rope_theta must be positive");
  if (c.hidden_act != "gelu_pytorch_tanh" && c.hidden_act != "gelu") {
    return core::unsupported("vision_config.hidden_act \"" + c.hidden_act +
                             "\" (only \"gelu_pytorch_tanh\" and \"gelu\" are supported)");
  }
  return c;
}

}  // namespace loom::models::qwen3_vl
