// Qwen2.5-VL (Qwen2_5_VLForConditionalGeneration): the Qwen2 decoder with M-RoPE, the window
// vision tower (vision_tower.h), the image / video processors and transformers' get_rope_index
// (mrope_positions.h), put together behind CausalLM::prepare_multimodal.
#pragma once

#include <memory>

#include "core/status.h"
#include "models/checkpoint/checkpoint.h"
#include "models/config/model_config.h"
#include "models/model.h"

namespace loom::models::qwen_vl {

core::Expected<std::unique_ptr<CausalLM>> make_qwen2_5_vl(const ModelConfig& config, const Checkpoint& ckpt,
                                                          ops::Ops& ops, const LoadOptions& options);

}  // namespace loom::models::qwen_vl
