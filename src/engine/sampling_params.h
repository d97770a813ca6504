// Per-request sampling settings and their parsing from an OpenAI-compatible request body.
//
// Semantics follow vLLM's OpenAI server (users come from there): the same field names, the same
// ranges, the same defaults, and defaults taken from the model's generation_config.json when the
// request leaves a field out. See sampler.h for how the fields act on the logits and
// stop_checker.h for how stops, min_tokens and max_tokens end a sequence.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"

namespace loom::engine {

// Temperatures below this are greedy decoding (vLLM's _SAMPLING_EPS).
inline constexpr double kGreedyTemperature = 1e-5;
// Positive temperatures below this are raised to it, as vLLM does (dividing by a tiny
// temperature overflows f32 logits to inf).
inline constexpr double kMinSamplingTemperature = 1e-2;
// Most logprobs a request may ask for per token (OpenAI's top_logprobs limit, vLLM's default).
inline constexpr int32_t kMaxLogprobs = 20;
// OpenAI clamps logit_bias values to this magnitude.
inline constexpr float kMaxLogitBias = 100.0f;

struct SamplingParams {
  int32_t n = 1;
  double temperature = 1.0;         // 0 (below kGreedyTemperature) => greedy
  double top_p = 1.0;               // (0, 1]; 1 => disabled
  int32_t top_k = 0;                // 0 or -1 => disabled; 1 => greedy
  double min_p = 0.0;               // [0, 1]; 0 => disabled
  double repetition_penalty = 1.0;  // over prompt + output tokens (vLLM, HF); 1 => disabled
  double presence_penalty = 0.0;    // over output tokens, [-2, 2]
  double frequency_penalty = 0.0;   // over output tokens, [-2, 2]
  std::optional<uint64_t> seed;     // per-request RNG seed (sequence i of n uses seed + i)
  int32_t max_tokens = -1;          // -1 => until the context limit; else >= 1
  int32_t min_tokens = 0;           // stops (eos, stop_token_ids, stop strings) are ignored before this many
  std::vector<std::string> stop;    // stop strings, non-empty, UTF-8
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  int32_t logprobs = -1;  // -1 => no logprobs; k >= 0 => sampled token's logprob + top-k
  std::vector<std::pair<int32_t, float>> logit_bias;  // OpenAI logit_bias: (token id, added to its logit)

  bool is_greedy() const { return temperature < kGreedyTemperature || top_k == 1; }

  // Validates ranges (vLLM's rules): n >= 1 (and n == 1 when greedy by temperature);
  // 0 <= temperature <= 2; 0 < top_p <= 1; top_k >= -1; 0 <= min_p <= 1;
  // repetition_penalty finite and > 0; -2 <= presence/frequency <= 2; max_tokens == -1 or >= 1;
  // 0 <= min_tokens (<= max_tokens when set); -1 <= logprobs <= kMaxLogprobs; no empty stop string;
  // token ids >= 0; finite logit biases. InvalidArgument names the field.
  core::Status validate() const;

  // Checks stop_token_ids and logit_bias ids against the model's vocabulary (logits row width).
  // The server must call this at admission: Sampler::sample treats an out-of-range id as a bug.
  core::Status validate_token_ids(int64_t vocab_size) const;
};

// Defaults from the model's generation_config.json, used where a request leaves a field out
// (vLLM's default_sampling_params). Unset => the OpenAI defaults (temperature 1, top_p 1,
// top_k 0, min_p 0, repetition_penalty 1).
struct SamplingDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k;
};

// Reads temperature, top_p, top_k, min_p and repetition_penalty from a parsed
// generation_config.json (other keys are ignored; null counts as absent). A wrongly typed value ->
// InvalidArgument naming "generation_config.<field>". (vLLM also caps max_tokens by
// max_new_tokens; Loom does not, so a request without max_tokens runs to the context limit.)
core::Expected<SamplingDefaults> sampling_defaults_from_generation_config(const nlohmann::json& gen_config);

// Parses the sampling-related fields of an OpenAI /v1/chat/completions body: temperature, top_p, n,
// max_tokens / max_completion_tokens (the latter wins), stop (string or list), seed (-1 => none),
// presence_penalty, frequency_penalty, logprobs (bool) + top_logprobs (0..20; > 0 needs logprobs),
// logit_bias ({"token id": bias}, bias clamped to [-100, 100]), and vLLM's extras top_k, min_p,
// repetition_penalty, min_tokens, stop_token_ids (deduplicated), ignore_eos,
// include_stop_str_in_output. Other fields are ignored; JSON null counts as absent. Greedy requests
// (temperature 0) get top_p 1, top_k 0, min_p 0 as in vLLM. The result has passed validate().
// Wrong types / out-of-range values -> InvalidArgument naming the field.
core::Expected<SamplingParams> parse_sampling_params(const nlohmann::json& request,
                                                     const SamplingDefaults& defaults);

}  // namespace loom::engine
