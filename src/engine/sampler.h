// Token sampling from one row of logits: logit_bias, min_tokens, penalties, temperature, min-p,
// top-k, top-p, a seeded draw, and logprobs. Semantics follow vLLM v1's sampler
// (vllm/v1/sample/sampler.py), in its order:
//
//   raw logits ──► logprobs (log_softmax of the RAW logits; vLLM's default "raw_logprobs")
//       │
//       ▼ logit_bias ─► min_tokens (eos + stop_token_ids to -inf while output < min_tokens)
//       ▼ penalties: repetition (prompt + output) ─► frequency (output) ─► presence (output)
//       ├──► greedy (temperature < 1e-5 or top_k == 1): argmax, ties -> lowest id
//       ▼ temperature (raised to >= 1e-2) ─► min_p ─► top_k ─► top_p ─► draw from the softmax of
//         what is left (inverse CDF over the kept tokens in id order, one uniform draw)
//
// Everything is f32 except probability sums, which accumulate in double. The logprobs reported are
// those of the model's raw distribution, before any of the processing above, so they do not
// depend on the sampling settings; the sampled token's logprob is reported even when it is not in
// the top list (OpenAI's shape: token + logprob + top_logprobs).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "engine/sampling_params.h"

namespace loom::engine {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

struct SampleResult {
  int32_t token = -1;
  float logprob = 0;  // raw logprob of `token` (-inf possible); 0 (not computed) when params.logprobs < 0
  // The top `params.logprobs` tokens by raw logprob, highest first, ties by lower id.
  std::vector<TokenLogprob> top;
};

// Deterministic per-sequence random stream (xoshiro256** seeded through splitmix64; both are
// fixed algorithms, so a seed gives the same tokens on every run for the same logits; across
// platforms only as far as their libm exp agrees).
// Sequence `index` of an n > 1 request uses seed + index, as vLLM does for its child requests.
// Without a seed the state comes from std::random_device. Greedy steps draw nothing; a sampled
// step draws exactly one number.
class SamplerRng {
 public:
  explicit SamplerRng(std::optional<uint64_t> seed, uint64_t index = 0);
  uint64_t next_u64();
  // Uniform in [0, 1), 53 random bits.
  double next_double();

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  // eos_token_ids: the model's end-of-sequence ids (tokenizer eos plus generation_config's
  // eos_token_id list). min_tokens masks them together with params.stop_token_ids (as vLLM masks
  // its all_stop_token_ids, ignore_eos or not).
  explicit Sampler(std::vector<int32_t> eos_token_ids = {});

  // logits: one row [vocab] of the model's raw output (processed in a scratch copy, not in place).
  // prompt_ids / output_ids: the sequence so far, for penalties and min_tokens.
  // Preconditions (LOOM_CHECK): vocab > 0, no NaN logit, at least one token left after masking,
  // every id in params.logit_bias / stop_token_ids / eos < vocab (SamplingParams::validate_token_ids
  // at admission), prompt/output ids in [0, vocab).
  SampleResult sample(std::span<const float> logits, const SamplingParams& params,
                      std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                      SamplerRng& rng) const;

  // The logits greedy decoding takes the argmax of: logit_bias, min_tokens and penalties applied.
  // logits: [vocab], modified in place.
  void apply_pre_sampling(std::span<float> logits, const SamplingParams& params,
                          std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids) const;

  // The distribution a non-greedy `sample` draws from: softmax of the logits after every step
  // above, as probabilities [vocab] (0 for masked tokens; sums to 1 up to rounding). For tests
  // and debugging.
  std::vector<double> sampling_distribution(std::span<const float> logits, const SamplingParams& params,
                                            std::span<const int32_t> prompt_ids,
                                            std::span<const int32_t> output_ids) const;

 private:
  // Temperature, min_p and top_k, after the greedy branch point; logits: [vocab] in place, masked
  // tokens -> -inf. top_p then runs on the surviving candidates (sampler.cpp), sharing their exp.
  void apply_sampling_filters(std::span<float> logits, const SamplingParams& params) const;

  std::vector<int32_t> eos_token_ids_;
};

// The individual processors, in-place on one row of logits [vocab]. Masked tokens become -inf.
namespace logits_ops {

// logits[id] += bias for every (id, bias); repeated ids add up.
void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias);
// logits[id] = -inf for every id.
void mask_tokens(std::span<float> logits, std::span<const int32_t> ids);
// Repetition (vLLM/HF): for each distinct token in prompt + output, a positive logit is divided by
// `repetition`, a non-positive one multiplied by it. Then, with c = the token's count in output:
// logit -= frequency * c, and logit -= presence if c > 0 (OpenAI's definition).
void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_ids,
                     std::span<const int32_t> output_ids, float repetition, float frequency, float presence);
// logits /= temperature.
void apply_temperature(std::span<float> logits, float temperature);
// Masks tokens whose probability is below min_p times the top token's, i.e. logit < max + log(min_p).
void apply_min_p(std::span<float> logits, float min_p);
// Keeps the tokens whose logit is >= the k-th largest logit (ties at the k-th value all stay, as in
// vLLM and HF); k <= 0 or k >= vocab is a no-op.
void apply_top_k(std::span<float> logits, int32_t k);
// Nucleus: in order of decreasing logit (ties: lower id first), keeps a token while the probability
// mass of the tokens before it is < p; so the smallest prefix whose mass reaches p stays, and the top
// token always does. Equals vLLM/HF's "mask where the ascending cumulative sum <= 1 - p". p >= 1 is a
// no-op.
void apply_top_p(std::span<float> logits, float p);
// Index of the largest logit, ties -> lowest id. -1 if every logit is -inf.
int32_t argmax(std::span<const float> logits);
// log(sum(exp(logits))), computed stably (max-shifted, summed in double). -inf if all are -inf.
float log_sum_exp(std::span<const float> logits);
// The `k` largest logits, highest first, ties by lower id (k clamped to vocab).
std::vector<TokenLogprob> top_k_entries(std::span<const float> logits, int32_t k);

}  // namespace logits_ops

}  // namespace loom::engine
