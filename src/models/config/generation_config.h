// generation_config.json: the model's default sampling settings and stop tokens.
//
// eos_token_ids is the union, in order, of generation_config.json's eos_token_id (an int or a list)
// and the eos ids config.json declares (config_eos_token_ids): stopping on either is what users
// expect, and Qwen checkpoints differ in which file lists <|endoftext|> and <|im_end|>.
// bos/pad come from generation_config.json, else from config.json. The sampling fields stay
// nullopt when the file does not set them, so the caller can tell "model default" from "unset".
// A missing generation_config.json is not an error: the result holds only config.json's ids.
// Wrong types or out-of-range values -> InvalidArgument naming the field.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "models/config/model_config.h"

namespace loom::models {

struct GenerationConfig {
  std::vector<int32_t>
      eos_token_ids;  // union of generation_config eos_token_id (int or list) and config.json's
  std::optional<int32_t> bos_token_id, pad_token_id;
  bool do_sample = false;
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, max_new_tokens;
};

// Reads <model_dir>/generation_config.json; a missing file -> defaults from config.json.
core::Expected<GenerationConfig> load_generation_config(const std::string& model_dir, const ModelConfig& cfg);
// `gen` is the parsed generation_config.json (an empty object when there is none).
core::Expected<GenerationConfig> parse_generation_config(const nlohmann::json& gen, const ModelConfig& cfg);

}  // namespace loom::models
