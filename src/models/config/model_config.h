// Typed view of a Hugging Face config.json for the Qwen families, validated once at parse time.
//
// Accepted model_type values and where the decoder's fields are read from:
//   qwen2, qwen3                          top level
//   qwen2_5_vl                            text_config when present (transformers >= 4.53), else the
//                                         top level (older checkpoints)
//   qwen3_vl                              text_config
//   qwen2_5_omni                          thinker_config.text_config (token ids: thinker_config)
//   qwen2_5_omni_thinker                  text_config (a thinker-only checkpoint)
//   qwen2_5_vl_text, qwen3_vl_text,
//   qwen2_5_omni_text                     top level (a bare text decoder config)
// Both spellings transformers has written are accepted: rope_theta + rope_scaling (4.x) and
// rope_parameters (5.x), torch_dtype and dtype. Absent keys take the defaults of the transformers
// configuration class of that decoder (listed in model_config.cpp), so the result equals what
// transformers builds; tests/fixtures/configs/*/expected.json pins that against transformers itself.
// Errors: unknown model_type -> Unsupported naming it; a missing required field or a field of the
// wrong type -> InvalidArgument naming the field path (e.g. "thinker_config.text_config.hidden_size").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom::models {

// Rotary embedding parameters, standardised as transformers does:
//   type: default | linear | dynamic | yarn | llama3 ("mrope" is read as default; M-RoPE is
//   expressed by mrope_section). longrope and anything else -> Unsupported at parse time.
struct RopeConfig {
  std::string type = "default";
  double theta = 10000.0;
  double factor = 1.0;  // linear/dynamic/yarn/llama3 (required for those)
  // yarn (transformers' defaults; attention_factor 0 = derive from factor/mscale)
  double beta_fast = 32, beta_slow = 1, attention_factor = 0, mscale = 0, mscale_all_dim = 0;
  // llama3 (required for llama3)
  double low_freq_factor = 1, high_freq_factor = 4;
  // yarn/llama3: the pre-training context; when the config omits it, transformers (and this parser)
  // use max_position_embeddings. 0 for the other types.
  int64_t original_max_position_embeddings = 0;
  // M-RoPE (Qwen2.5-VL, Qwen2.5-Omni, Qwen3-VL): rotary pairs given to the temporal, height and
  // width positions; sums to rotary_dim / 2. Empty for 1-D RoPE.
  std::vector<int> mrope_section;
  bool mrope_interleaved = false;      // Qwen3-VL: t/h/w interleaved over the pairs instead of in blocks
  double partial_rotary_factor = 1.0;  // rotary_dim = head_dim * partial_rotary_factor
};

struct TextConfig {  // the decoder's hyper-parameters
  // "qwen2", "qwen3", "qwen2_5_vl_text", "qwen3_vl_text" or "qwen2_5_omni_text"
  std::string model_type;
  int64_t vocab_size = 0, hidden_size = 0, intermediate_size = 0, num_hidden_layers = 0,
          num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0, max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  RopeConfig rope;
  // Whether lm_head shares the input embedding matrix, resolved per family as transformers does
  // (Qwen2.5-VL: top level or text_config; Qwen3-VL: top level; Omni: thinker_config's flag).
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases: always true for the Qwen2 family, config key for Qwen3
  bool qk_norm = false;         // Qwen3 family: RMSNorm over head_dim on q and k
  std::string hidden_act = "silu";
  // Sliding-window attention. sliding_window is 0 unless use_sliding_window is set (transformers
  // drops the window otherwise). Qwen3-VL has no sliding window: all three stay 0/false.
  bool use_sliding_window = false;
  int64_t sliding_window = 0;
  int64_t max_window_layers = 0;
  // "full_attention" / "sliding_attention" for every layer (always num_hidden_layers entries): from
  // the config when given, else derived as transformers does (sliding for layer i >= max_window_layers
  // when the window is on).
  std::vector<std::string> layer_types;
  std::string dtype;  // dtype / torch_dtype: top level first, then the text config; "" if absent
};

struct ModelConfig {
  std::string architecture;  // architectures[0] ("" if absent)
  std::string model_type;    // top-level model_type
  TextConfig text;
  nlohmann::json raw;         // the whole config.json (vision/audio configs are parsed by later issues)
  nlohmann::json vision_raw;  // vision_config (null when absent); for Omni: thinker_config.vision_config
  nlohmann::json audio_raw;   // Omni: thinker_config.audio_config (null otherwise)
  // Special token ids when the config has them (*_token_index spellings of Omni accepted); -1 when
  // absent. Unlike transformers, no default ids are invented for absent keys.
  int64_t image_token_id = -1, video_token_id = -1, audio_token_id = -1, vision_start_token_id = -1,
          vision_end_token_id = -1, audio_start_token_id = -1, audio_end_token_id = -1;
};

core::Expected<ModelConfig> load_model_config(const std::string& model_dir);  // reads <model_dir>/config.json
core::Expected<ModelConfig> parse_model_config(const nlohmann::json& j);

// eos / bos / pad ids that config.json itself declares: the top level, the text config and (Omni) the
// thinker config, in that order, duplicates removed. Used by load_generation_config.
std::vector<int32_t> config_eos_token_ids(const ModelConfig& cfg);
int32_t config_bos_token_id(const ModelConfig& cfg);  // -1 if none
int32_t config_pad_token_id(const ModelConfig& cfg);  // -1 if none

}  // namespace loom::models
