// Qwen3-VL (Qwen3VLForConditionalGeneration): the Qwen3 decoder with interleaved M-RoPE and
// DeepStack inputs, the Qwen3-VL vision tower (vision_tower.h), the processor with per-frame video
// timestamps (processor.h) and get_rope_index (mrope_positions.h), behind prepare_multimodal.
#pragma once

#include <memory>

#include "core/status.h"
#include "models/checkpoint/checkpoint.h"
#include "models/config/model_config.h"
#include "models/model.h"

namespace loom::models::qwen3_vl {

core::Expected<std::unique_ptr<CausalLM>> make_qwen3_vl(const ModelConfig& config, const Checkpoint& ckpt,
                                                        ops::Ops& ops, const LoadOptions& options);

}  // namespace loom::models::qwen3_vl
