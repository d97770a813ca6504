#include "models/qwen3_vl/vision_config.h"

#include <algorithm>
#include <set>
#include <string_view>
#include <utility>

namespace loom::models::qwen3_vl {
namespace {

// Reads optional fields of one JSON object, keeping the first type error.
class Reader {
 public:
  explicit Reader(const nlohmann::json& obj) : obj_(obj) {}
  const core::Status& status() const { return status_; }

  void get_int(std::string_view key, int64_t& out) {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return fail(key, "an integer");
    out = v->get<int64_t>();
  }
  void get_number(std::string_view key, double& out, const nlohmann::json* obj = nullptr) {
    const nlohmann::json* v = find(key, obj);
    if (v == nullptr) return;
    if (!v->is_number()) return fail(key, "a number");
    out = v->get<double>();
  }
  void get_string(std::string_view key, std::string& out) {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_string()) return fail(key, "a string");
    out = v->get<std::string>();
  }
  void get_int_list(std::string_view key, std::vector<int64_t>& out) {
    const nlohmann::json* v = find(key);
    if (v == nullptr) return;
    if (!v->is_array()) return fail(key, "a list of integers");
    std::vector<int64_t> vals;
    for (const auto& e : *v) {
      if (!e.is_number_integer()) return fail(key, "a list of integers");
      vals.push_back(e.get<int64_t>());
    }
    out = std::move(vals);
  }
  const nlohmann::json* find(std::string_view key, const nlohmann::json* obj = nullptr) const {
    const nlohmann::json& o = obj != nullptr ? *obj : obj_;
    auto it = o.find(key);
    if (it == o.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void fail(std::string_view key, const char* want) {
    if (status_.ok()) {
      status_ = core::invalid_argument("vision_config." + std::string(key) + " must be " + want);
    }
  }

 private:
  const nlohmann::json& obj_;
  core::Status status_;
};

}  // namespace

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
  Reader r(j);
  r.get_int("depth", c.depth);
  r.get_int("hidden_size", c.hidden_size);
  r.get_int("intermediate_size", c.intermediate_size);
  r.get_int("num_heads", c.num_heads);
  r.get_int("in_channels", c.in_channels);
  r.get_int("patch_size", c.patch_size);
  r.get_int("spatial_merge_size", c.spatial_merge_size);
  r.get_int("temporal_patch_size", c.temporal_patch_size);
  r.get_int("out_hidden_size", c.out_hidden_size);
  r.get_int("num_position_embeddings", c.num_position_embeddings);
  r.get_int_list("deepstack_visual_indexes", c.deepstack_visual_indexes);
  r.get_string("hidden_act", c.hidden_act);
  r.get_number("rope_theta", c.rope_theta);
  if (const nlohmann::json* rp = r.find("rope_parameters"); rp != nullptr) {
    if (!rp->is_object()) {
      r.fail("rope_parameters", "an object");
    } else {
      r.get_number("rope_theta", c.rope_theta, rp);
      if (const nlohmann::json* type = r.find("rope_type", rp);
          type != nullptr && !(type->is_string() && type->get<std::string>() == "axial")) {
        return core::unsupported("vision_config.rope_parameters.rope_type must be \"axial\"");
      }
    }
  }
  if (!r.status().ok()) return r.status();

  for (auto [name, v] : {std::pair<const char*, int64_t>{"depth", c.depth},
                         {"hidden_size", c.hidden_size},
                         {"intermediate_size", c.intermediate_size},
                         {"num_heads", c.num_heads},
                         {"in_channels", c.in_channels},
                         {"patch_size", c.patch_size},
                         {"spatial_merge_size", c.spatial_merge_size},
                         {"temporal_patch_size", c.temporal_patch_size},
                         {"out_hidden_size", c.out_hidden_size},
                         {"num_position_embeddings", c.num_position_embeddings}}) {
    if (v <= 0) {
      return core::invalid_argument(std::string("vision_config.") + name + " must be positive, got " +
                                    std::to_string(v));
    }
  }
  if (c.hidden_size % c.num_heads != 0) {
    return core::invalid_argument("vision_config.hidden_size " + std::to_string(c.hidden_size) +
                                  " is not a multiple of num_heads " + std::to_string(c.num_heads));
  }
  if (c.head_dim() % 4 != 0) {
    return core::invalid_argument("vision head_dim " + std::to_string(c.head_dim()) +
                                  " must be a multiple of 4 (2D rotary embedding)");
  }
  std::set<int64_t> seen;
  for (int64_t b : c.deepstack_visual_indexes) {
    if (b < 0 || b >= c.depth) {
      return core::invalid_argument("vision_config.deepstack_visual_indexes entry " + std::to_string(b) +
                                    " is outside [0, depth)");
    }
    if (!seen.insert(b).second) {
      return core::invalid_argument("vision_config.deepstack_visual_indexes lists block " +
                                    std::to_string(b) + " twice");
    }
  }
  if (!(c.rope_theta > 0)) return core::invalid_argument("vision rope_theta must be positive");
  if (c.hidden_act != "gelu_pytorch_tanh" && c.hidden_act != "gelu") {
    return core::unsupported("vision_config.hidden_act \"" + c.hidden_act +
                             "\" (only \"gelu_pytorch_tanh\" and \"gelu\" are supported)");
  }
  return c;
}

}  // namespace loom::models::qwen3_vl
