// One generation stream: a prompt and the tokens sampled after it. The scheduler moves
// `num_computed` (tokens whose KV is cached) toward `total_len()` under a token budget;
// prefill and decode are the same operation with different amounts of catching up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace loom::engine {

struct Sequence {
  int64_t id = 0;
  std::vector<int32_t> tokens;  // prompt then output
  int64_t prompt_len = 0;
  int64_t num_computed = 0;     // tokens whose KV is in the cache
  std::vector<int32_t> blocks;  // KV blocks, in order
  SamplingParams params;
  int64_t max_len = 0;  // stop with "length" when tokens.size() reaches this

  int64_t total_len() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output() const { return total_len() - prompt_len; }
};

}  // namespace loom::engine
