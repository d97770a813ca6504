#include "engine/engine.h"

#include <algorithm>
#include <thread>

namespace loom::engine {

struct Engine::SeqState {
  Sequence seq;
  SamplerRng rng;
  text::IncrementalDetokenizer detok;
  StopChecker stop;

  SeqState(const text::Tokenizer& tok, const SamplingParams& params, std::span<const int32_t> eos,
           int32_t max_new_tokens, uint64_t rng_index)
      : rng(params.seed, rng_index),
        detok(tok, /*skip_special_tokens=*/true),
        stop(params, eos, max_new_tokens) {}
};

namespace {

std::unique_ptr<BlockManager> make_block_manager(const models::CausalLM& model, EngineConfig& config) {
  if (config.max_model_len <= 0) config.max_model_len = model.text_config().max_position_embeddings;
  config.max_model_len = std::min(config.max_model_len, model.text_config().max_position_embeddings);
  if (config.kv_cache_tokens <= 0) config.kv_cache_tokens = std::max<int64_t>(config.max_model_len, 8192);
  // Every admitted sequence must fit on its own, or the scheduler could wait forever.
  config.kv_cache_tokens = std::max(config.kv_cache_tokens, config.max_model_len);
  const int64_t blocks = (config.kv_cache_tokens + config.block_size - 1) / config.block_size;
  return std::make_unique<BlockManager>(static_cast<int32_t>(blocks), config.block_size);
}

// Whether the device sampler covers this sequence's next step: it has no token history, so no
// penalties, and no per-token adjustments (logit_bias, min_tokens masking).
bool device_samplable(const Sequence& seq) {
  const SamplingParams& p = seq.params;
  return p.logit_bias.empty() && p.repetition_penalty == 1.0 && p.presence_penalty == 0.0 &&
         p.frequency_penalty == 0.0 && seq.num_output() >= p.min_tokens;
}

}  // namespace

Engine::Engine(std::unique_ptr<models::CausalLM> model, const text::Tokenizer& tokenizer, EngineConfig config)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      config_(std::move(config)),
      blocks_(make_block_manager(*model_, config_)),
      scheduler_(config_.scheduler, *blocks_),
      sampler_(config_.eos_token_ids) {
  kv_ = model_->allocate_kv(blocks_->num_blocks(), config_.block_size);
}

Engine::~Engine() = default;

core::Expected<int64_t> Engine::add_sequence(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                             uint64_t rng_index) {
  const auto prompt_len = static_cast<int64_t>(prompt_ids.size());
  if (prompt_len == 0) return core::invalid_argument("the prompt is empty");
  if (prompt_len >= config_.max_model_len)
    return core::out_of_range("the prompt has " + std::to_string(prompt_len) +
                              " tokens; this model's context is " + std::to_string(config_.max_model_len) +
                              " tokens and needs room for at least one generated token");
  if (params.max_tokens > 0 && prompt_len + params.max_tokens > config_.max_model_len)
    return core::out_of_range("prompt (" + std::to_string(prompt_len) + " tokens) + max_tokens (" +
                              std::to_string(params.max_tokens) + ") exceeds the model's context of " +
                              std::to_string(config_.max_model_len) + " tokens");
  LOOM_RETURN_IF_ERROR(params.validate());
  LOOM_RETURN_IF_ERROR(params.validate_token_ids(model_->vocab_size()));
  for (int32_t id : prompt_ids)
    if (id < 0 || id >= model_->vocab_size())
      return core::invalid_argument("prompt token id " + std::to_string(id) + " is outside the vocabulary");

  const int64_t id = next_id_++;
  auto state =
      std::make_unique<SeqState>(tokenizer_, params, config_.eos_token_ids,
                                 static_cast<int32_t>(config_.max_model_len - prompt_len), rng_index);
  state->seq.id = id;
  state->seq.tokens = std::move(prompt_ids);
  state->seq.prompt_len = prompt_len;
  state->seq.params = params;
  state->seq.max_len = config_.max_model_len;
  scheduler_.add(&state->seq);
  seqs_.emplace(id, std::move(state));
  return id;
}

void Engine::abort_sequence(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  scheduler_.remove(&it->second->seq);
  seqs_.erase(it);
}

core::Expected<std::vector<SequenceOutput>> Engine::step() {
  std::vector<SequenceOutput> outputs;
  SchedulerOutput plan = scheduler_.schedule();
  if (plan.scheduled.empty()) {
    if (scheduler_.empty()) return outputs;
    return core::internal_error("scheduler made no progress (KV cache too small for one sequence)");
  }

  // Flatten the scheduled tokens: sequence after sequence, each from its num_computed.
  models::ForwardBatch batch;
  batch.block_size = config_.block_size;
  int32_t max_blocks = 0;
  for (const auto& s : plan.scheduled)
    max_blocks = std::max(max_blocks, static_cast<int32_t>(s.seq->blocks.size()));
  batch.max_blocks_per_seq = max_blocks;
  batch.q_indptr.push_back(0);
  std::vector<const ScheduledSeq*> sampling;
  for (const auto& s : plan.scheduled) {
    const Sequence& seq = *s.seq;
    for (int64_t p = seq.num_computed; p < seq.num_computed + s.num_tokens; ++p) {
      batch.token_ids.push_back(seq.tokens[static_cast<size_t>(p)]);
      batch.positions.push_back(static_cast<int32_t>(p));
      const int32_t block = seq.blocks[static_cast<size_t>(p / config_.block_size)];
      batch.slot_mapping.push_back(block * config_.block_size + static_cast<int32_t>(p % config_.block_size));
    }
    batch.q_indptr.push_back(static_cast<int32_t>(batch.token_ids.size()));
    batch.kv_lens.push_back(static_cast<int32_t>(seq.num_computed + s.num_tokens));
    for (int32_t i = 0; i < max_blocks; ++i)
      batch.block_table.push_back(
          i < static_cast<int32_t>(seq.blocks.size()) ? seq.blocks[static_cast<size_t>(i)] : 0);
    if (s.samples()) {
      batch.logits_rows.push_back(batch.q_indptr.back() - 1);
      sampling.push_back(&s);
    }
  }

  // Rows the device sampler can take (no penalties, logit bias or min_tokens masking): then the
  // logits stay on the device and only tokens and logprobs come back.
  bool device_sampling = !sampling.empty();
  for (const ScheduledSeq* s : sampling) device_sampling = device_sampling && device_samplable(*s->seq);
  LOOM_RETURN_IF_ERROR(model_->forward(batch, kv_, logits_, nullptr, device_sampling));
  scheduler_.commit(plan);
  if (device_sampling && logits_.device() == core::Device::kCpu) device_sampling = false;  // host anyway

  // Sample every row (rows are independent: each sequence has its own RNG), spread over
  // threads when the batch is large; then append, detokenize and check stops in order.
  const int64_t vocab = model_->vocab_size();
  std::vector<SampleResult> results(sampling.size());
  if (device_sampling) {
    std::vector<ops::DeviceSampleRow> rows(sampling.size());
    for (size_t i = 0; i < sampling.size(); ++i) {
      const Sequence& seq = *sampling[i]->seq;
      const SamplingParams& p = seq.params;
      ops::DeviceSampleRow& r = rows[i];
      r.greedy = p.is_greedy();
      r.temperature = static_cast<float>(p.temperature);
      r.top_p = static_cast<float>(p.top_p);
      r.top_k = p.top_k;
      r.min_p = static_cast<float>(p.min_p);
      r.num_logprobs = p.logprobs;
      // One draw per sampled (non-greedy) step, from the sequence's own stream, as on the host.
      if (!r.greedy) r.uniform = seqs_.at(seq.id)->rng.next_double();
    }
    std::vector<ops::DeviceSampleResult> dres;
    LOOM_CHECK(model_->backend().sample(logits_, rows, &dres)) << "device logits but no device sampler";
    for (size_t i = 0; i < sampling.size(); ++i) {
      results[i].token = dres[i].token;
      results[i].logprob = dres[i].logprob;
      for (const auto& [id, lp] : dres[i].top) results[i].top.push_back({id, lp});
    }
  }
  auto sample_rows = [&](size_t begin, size_t end) {
    for (size_t i = begin; i < end; ++i) {
      Sequence& seq = *sampling[i]->seq;
      std::span<const float> row(logits_.data_as<float>() + static_cast<int64_t>(i) * vocab,
                                 static_cast<size_t>(vocab));
      std::span<const int32_t> all(seq.tokens);
      results[i] = sampler_.sample(row, seq.params, all.first(static_cast<size_t>(seq.prompt_len)),
                                   all.subspan(static_cast<size_t>(seq.prompt_len)), seqs_.at(seq.id)->rng);
    }
  };
  const size_t workers =
      std::min<size_t>(sampling.size() / 4, std::max(1u, std::thread::hardware_concurrency()));
  if (device_sampling) {
    // done above
  } else if (workers <= 1) {
    sample_rows(0, sampling.size());
  } else {
    std::vector<std::thread> pool;
    const size_t per = (sampling.size() + workers - 1) / workers;
    for (size_t w = 0; w < workers; ++w)
      pool.emplace_back(sample_rows, w * per, std::min(sampling.size(), (w + 1) * per));
    for (auto& t : pool) t.join();
  }
  for (size_t i = 0; i < sampling.size(); ++i) {
    Sequence& seq = *sampling[i]->seq;
    SeqState& st = *seqs_.at(seq.id);
    SampleResult r = std::move(results[i]);
    seq.tokens.push_back(r.token);
    SequenceOutput out;
    out.seq_id = seq.id;
    out.new_tokens.push_back(r.token);
    out.new_samples.push_back(std::move(r));
    std::string delta = st.detok.push(out.new_tokens.back());
    FinishReason reason = st.stop.append(out.new_tokens.back(), delta);
    // On a finish other than a stop string, bytes the detokenizer still holds (an incomplete
    // character) become U+FFFD, as a full decode of the output would show them.
    std::string rest;
    if (reason != FinishReason::kNone && st.stop.stop_string().empty()) rest = st.detok.finish();
    out.new_text = st.stop.take_stream_text() + rest;
    if (reason != FinishReason::kNone) {
      out.finished = true;
      out.finish_reason = reason;
      if (!st.stop.stop_string().empty()) out.stop_string = st.stop.stop_string();
      if (st.stop.stop_token() && !st.stop.stopped_on_eos()) out.stop_token = st.stop.stop_token();
      scheduler_.remove(&seq);
      seqs_.erase(seq.id);
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

}  // namespace loom::engine
