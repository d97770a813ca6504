// The one place that maps a checkpoint's architecture to the code that runs it.
// Adding a family = one folder under models/ + one line in registry.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/checkpoint/checkpoint.h"
#include "models/config/model_config.h"
#include "models/model.h"
#include "ops/ops.h"

namespace loom::models {

using CausalLMFactory = core::Expected<std::unique_ptr<CausalLM>> (*)(const ModelConfig&, const Checkpoint&,
                                                                      ops::Ops&, const LoadOptions&);

struct ModelFamily {
  const char* name;                        // e.g. "qwen"
  std::vector<std::string> architectures;  // config.json "architectures" entries it runs
  CausalLMFactory make_causal_lm;
};

const std::vector<ModelFamily>& model_families();

// Reads config.json and the weights of `model_dir` and builds the matching model.
core::Expected<std::unique_ptr<CausalLM>> load_causal_lm(const std::string& model_dir,
                                                         const ModelConfig& config, ops::Ops& ops,
                                                         const LoadOptions& options);

}  // namespace loom::models
