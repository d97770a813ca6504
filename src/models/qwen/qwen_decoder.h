// The Qwen2 / Qwen2.5 / Qwen3 decoder (and, through TextConfig, the text decoders of the
// VL and Omni families): embedding, pre-norm blocks of GQA attention (q/k/v biases for
// Qwen2, q/k RMSNorm for Qwen3) and SwiGLU MLP, final RMSNorm, tied or separate lm_head.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "models/checkpoint/checkpoint.h"
#include "models/config/model_config.h"
#include "models/model.h"

namespace loom::models::qwen {

// `prefix` is where the decoder's weights live ("model." for Qwen2/3 checkpoints); the
// lm_head is at `head_name` (empty: tied to the embedding).
core::Expected<std::unique_ptr<CausalLM>> make_qwen_causal_lm(const ModelConfig& config,
                                                              const Checkpoint& ckpt, ops::Ops& ops,
                                                              const LoadOptions& options);

}  // namespace loom::models::qwen
