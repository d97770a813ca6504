#include "models/registry.h"

#include <algorithm>

#include "models/qwen/qwen_decoder.h"
#include "models/qwen3_vl/qwen3_vl_model.h"
#include "models/qwen_vl/qwen_vl_model.h"

namespace loom::models {

const std::vector<ModelFamily>& model_families() {
  static const std::vector<ModelFamily> kFamilies = {
      {"qwen", {"Qwen2ForCausalLM", "Qwen3ForCausalLM"}, &qwen::make_qwen_causal_lm},
      {"qwen2_5_vl", {"Qwen2_5_VLForConditionalGeneration"}, &qwen_vl::make_qwen2_5_vl},
      {"qwen3_vl", {"Qwen3VLForConditionalGeneration"}, &qwen3_vl::make_qwen3_vl},
  };
  return kFamilies;
}

core::Expected<std::unique_ptr<CausalLM>> load_causal_lm(const std::string& model_dir,
                                                         const ModelConfig& config, ops::Ops& ops,
                                                         const LoadOptions& options) {
  for (const auto& family : model_families()) {
    const auto& archs = family.architectures;
    if (std::find(archs.begin(), archs.end(), config.architecture) == archs.end()) continue;
    LOOM_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::open(model_dir));
    LoadOptions with_dir = options;
    with_dir.model_dir = model_dir;
    return family.make_causal_lm(config, ckpt, ops, with_dir);
  }
  std::string known;
  for (const auto& family : model_families())
    for (const auto& a : family.architectures) known += (known.empty() ? "" : ", ") + a;
  return core::unsupported("architecture '" + config.architecture +
                           "' is not supported (supported: " + known + ")");
}

}  // namespace loom::models
