// The engine: admits requests, runs the scheduler -> model forward -> sampler loop with
// continuous batching (several requests share each forward), and turns tokens into text
// with stop handling. One instance per loaded model; not thread-safe (the server drives it
// from one loop thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "engine/block_manager.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "engine/scheduler.h"
#include "engine/sequence.h"
#include "engine/stop_checker.h"
#include "models/model.h"
#include "text/tokenizer.h"

namespace loom::engine {

struct EngineConfig {
  int32_t block_size = 16;
  int64_t max_model_len = 0;    // 0 => the model's max_position_embeddings
  int64_t kv_cache_tokens = 0;  // KV capacity in tokens; 0 => max(max_model_len, 8192)
  SchedulerConfig scheduler;
  std::vector<int32_t> eos_token_ids;
  // Decode steps of at most max_graph_batch sequences replay CUDA graphs on backends that
  // support them (off: every step runs eagerly, e.g. for profiling).
  bool cuda_graphs = true;
  int32_t max_graph_batch = 256;
};

// What one step produced for one sequence.
struct SequenceOutput {
  int64_t seq_id = 0;
  std::vector<int32_t> new_tokens;
  std::vector<SampleResult> new_samples;  // parallel to new_tokens
  std::string new_text;                   // text that became final this step (stop-safe)
  bool finished = false;
  FinishReason finish_reason = FinishReason::kNone;
  std::optional<std::string> stop_string;  // the stop string that ended it
  std::optional<int32_t> stop_token;       // the stop token id that ended it
};

class Engine {
 public:
  Engine(std::unique_ptr<models::CausalLM> model, const text::Tokenizer& tokenizer, EngineConfig config);
  ~Engine();

  // Admits one sequence; checks the prompt against max_model_len and sampling ids against the
  // vocabulary. Returns the sequence id.
  core::Expected<int64_t> add_sequence(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                       uint64_t rng_index = 0);
  // A multimodal prompt (models::CausalLM::prepare_multimodal): its token ids are the prompt; its
  // encoder embeddings replace the placeholder rows during prefill, its M-RoPE positions position
  // the prompt and its rope delta the generated tokens.
  core::Expected<int64_t> add_multimodal_sequence(std::shared_ptr<const models::MultimodalPrompt> prompt,
                                                  const SamplingParams& params, uint64_t rng_index = 0);
  void abort_sequence(int64_t seq_id);
  // One scheduler step + forward + sampling. Returns outputs of the sequences that sampled.
  core::Expected<std::vector<SequenceOutput>> step();
  bool has_unfinished() const { return !scheduler_.empty(); }

  const models::CausalLM& model() const { return *model_; }
  models::CausalLM& model() { return *model_; }
  const EngineConfig& config() const { return config_; }
  int64_t max_model_len() const { return config_.max_model_len; }
  const Scheduler& scheduler() const { return scheduler_; }

 private:
  struct SeqState;
  core::Status check_prompt(const std::vector<int32_t>& prompt_ids, const SamplingParams& params) const;
  core::Expected<int64_t> admit(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                uint64_t rng_index, std::shared_ptr<const models::MultimodalPrompt> mm);

  std::unique_ptr<models::CausalLM> model_;
  const text::Tokenizer& tokenizer_;
  EngineConfig config_;
  std::unique_ptr<BlockManager> blocks_;
  Scheduler scheduler_;
  Sampler sampler_;
  std::vector<models::LayerKv> kv_;
  std::unordered_map<int64_t, std::unique_ptr<SeqState>> seqs_;
  int64_t next_id_ = 1;
  int32_t spare_block_ = 0;  // KV block outside the block manager, for graph padding rows
  core::Tensor logits_;
};

}  // namespace loom::engine
