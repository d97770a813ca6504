#include "engine/engine.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace loom::engine {

struct Engine::SeqState {
  Sequence seq;
  std::shared_ptr<const models::MultimodalPrompt> mm;  // null for text prompts
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

// Batch sizes decode graphs are captured for (as vLLM's capture sizes): a step of n sequences
// runs the smallest bucket >= n.
int32_t graph_batch_size(int32_t n) {
  static constexpr int32_t kBuckets[] = {1,  2,  4,   8,   16,  24,  32,  48, 64,
                                         80, 96, 112, 128, 160, 192, 224, 256};
  for (int32_t b : kBuckets)
    if (b >= n) return b;
  return (n + 31) / 32 * 32;
}

// Copies the encoder rows a step needs into ForwardBatch::mm_embeds (and the DeepStack inputs).
void gather_multimodal_rows(const std::vector<std::pair<const models::MultimodalSpan*, int64_t>>& src,
                            models::ForwardBatch& batch) {
  const core::Tensor& first = src.front().first->embeds;
  const auto n = static_cast<int64_t>(src.size());
  const int64_t hidden = first.dim(1);
  const size_t row_bytes = first.nbytes() / static_cast<size_t>(first.dim(0));
  const size_t deepstack = src.front().first->deepstack.size();
  auto copy_rows = [&](auto pick) {
    core::Tensor out = core::Tensor::empty({n, hidden}, first.dtype());
    for (int64_t i = 0; i < n; ++i) {
      const core::Tensor& t = pick(*src[static_cast<size_t>(i)].first);
      LOOM_CHECK(t.dtype() == first.dtype() && t.dim(1) == hidden) << "multimodal embeddings of mixed shapes";
      std::memcpy(static_cast<char*>(out.data()) + static_cast<size_t>(i) * row_bytes,
                  static_cast<const char*>(t.data()) +
                      static_cast<size_t>(src[static_cast<size_t>(i)].second) * row_bytes,
                  row_bytes);
    }
    return out;
  };
  batch.mm_embeds =
      copy_rows([](const models::MultimodalSpan& s) -> const core::Tensor& { return s.embeds; });
  for (size_t l = 0; l < deepstack; ++l)
    batch.deepstack_embeds.push_back(copy_rows([l](const models::MultimodalSpan& s) -> const core::Tensor& {
      LOOM_CHECK(s.deepstack.size() > l) << "spans with different DeepStack depths";
      return s.deepstack[l];
    }));
}

}  // namespace

Engine::Engine(std::unique_ptr<models::CausalLM> model, const text::Tokenizer& tokenizer, EngineConfig config)
    : model_(std::move(model)),
      tokenizer_(tokenizer),
      config_(std::move(config)),
      blocks_(make_block_manager(*model_, config_)),
      scheduler_(config_.scheduler, *blocks_),
      sampler_(config_.eos_token_ids) {
  // One block more than the block manager hands out: the spare block padding rows of graph
  // batches write to.
  spare_block_ = blocks_->num_blocks();
  kv_ = model_->allocate_kv(blocks_->num_blocks() + 1, config_.block_size);
}

Engine::~Engine() = default;

core::Expected<int64_t> Engine::add_sequence(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                             uint64_t rng_index) {
  LOOM_RETURN_IF_ERROR(check_prompt(prompt_ids, params));
  return admit(std::move(prompt_ids), params, rng_index, nullptr);
}

core::Status Engine::check_prompt(const std::vector<int32_t>& prompt_ids,
                                  const SamplingParams& params) const {
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
  return {};
}

core::Expected<int64_t> Engine::add_multimodal_sequence(
    std::shared_ptr<const models::MultimodalPrompt> prompt, const SamplingParams& params,
    uint64_t rng_index) {
  LOOM_CHECK(prompt != nullptr);
  LOOM_RETURN_IF_ERROR(check_prompt(prompt->token_ids, params));
  const auto n = static_cast<int64_t>(prompt->token_ids.size());
  if (static_cast<int64_t>(prompt->mrope_positions.size()) != 3 * n)
    return core::invalid_argument("multimodal prompt: positions do not cover its tokens");
  const int32_t hidden = static_cast<int32_t>(model_->text_config().hidden_size);
  int64_t end = 0;
  for (const auto& sp : prompt->spans) {
    if (sp.offset < end || sp.length <= 0 || sp.offset + sp.length > n || sp.embeds.rank() != 2 ||
        sp.embeds.dim(0) != sp.length || sp.embeds.dim(1) != hidden)
      return core::invalid_argument("multimodal prompt: malformed embedding span");
    end = sp.offset + sp.length;
  }
  // Positions must stay inside the model's position table; the rope delta moves those of the
  // generated tokens, so it may end generation early ("length").
  const int64_t max_pos = model_->text_config().max_position_embeddings;
  for (int32_t p : prompt->mrope_positions)
    if (p < 0 || p >= max_pos)
      return core::out_of_range("the multimodal prompt's positions reach " + std::to_string(p) +
                                ", past the model's " + std::to_string(max_pos) + " positions");
  if (n + prompt->rope_delta >= max_pos)
    return core::out_of_range("the multimodal prompt leaves no position for a generated token");
  std::vector<int32_t> ids = prompt->token_ids;
  return admit(std::move(ids), params, rng_index, std::move(prompt));
}

core::Expected<int64_t> Engine::admit(std::vector<int32_t> prompt_ids, const SamplingParams& params,
                                      uint64_t rng_index,
                                      std::shared_ptr<const models::MultimodalPrompt> mm) {
  const auto prompt_len = static_cast<int64_t>(prompt_ids.size());
  const int64_t id = next_id_++;
  // Decode index p of a multimodal prompt sits at position p + rope_delta, which must stay below
  // the end of the position table: that may end generation before max_model_len ("length").
  int64_t max_len = config_.max_model_len;
  if (mm) max_len = std::min(max_len, model_->text_config().max_position_embeddings - mm->rope_delta);
  auto state = std::make_unique<SeqState>(tokenizer_, params, config_.eos_token_ids,
                                          static_cast<int32_t>(max_len - prompt_len), rng_index);
  state->seq.id = id;
  state->seq.tokens = std::move(prompt_ids);
  state->seq.prompt_len = prompt_len;
  state->seq.params = params;
  state->seq.max_len = max_len;
  state->mm = std::move(mm);
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

  // Rows the device sampler can take (no penalties, logit bias or min_tokens masking): then the
  // logits stay on the device and only tokens and logprobs come back.
  std::vector<const ScheduledSeq*> sampling;
  bool all_decode = true;
  for (const auto& s : plan.scheduled) {
    if (s.samples()) sampling.push_back(&s);
    all_decode = all_decode && s.num_tokens == 1 && s.samples();
  }
  bool device_sampling = !sampling.empty();
  for (const ScheduledSeq* s : sampling) device_sampling = device_sampling && device_samplable(*s->seq);
  // Decode-only steps on a graph-capable backend replay a CUDA graph captured per (batch
  // bucket, context bound): the batch is padded with dummy sequences that read and write only
  // the spare KV block, and the attention plans for a power-of-two bound of the context.
  const auto num_seqs = static_cast<int32_t>(plan.scheduled.size());
  const bool use_graph = config_.cuda_graphs && device_sampling && all_decode &&
                         num_seqs <= config_.max_graph_batch && model_->backend().supports_graphs();
  int32_t graph_batch = num_seqs, kv_bound = 0;
  if (use_graph) {
    graph_batch = graph_batch_size(num_seqs);
    int32_t max_kv = 0;
    for (const auto& s : plan.scheduled)
      max_kv = std::max(max_kv, static_cast<int32_t>(s.seq->num_computed + s.num_tokens));
    kv_bound = 256;
    while (kv_bound < max_kv) kv_bound *= 2;
    const auto cap = static_cast<int32_t>((config_.max_model_len + config_.block_size - 1) /
                                          config_.block_size * config_.block_size);
    kv_bound = std::max(std::min(kv_bound, cap), max_kv);
  }

  // Flatten the scheduled tokens: sequence after sequence, each from its num_computed.
  models::ForwardBatch batch;
  batch.block_size = config_.block_size;
  int32_t max_blocks = 0;
  for (const auto& s : plan.scheduled)
    max_blocks = std::max(max_blocks, static_cast<int32_t>(s.seq->blocks.size()));
  if (use_graph) max_blocks = (kv_bound + config_.block_size - 1) / config_.block_size;
  batch.max_blocks_per_seq = max_blocks;
  batch.q_indptr.push_back(0);
  // Multimodal prompts: h/w rows of M-RoPE (needed when some token's three positions differ) and
  // the encoder rows that replace placeholder embeddings (span, row) per batch row in mm_rows.
  std::vector<int32_t> pos_h, pos_w;
  bool need_mrope = false;
  std::vector<std::pair<const models::MultimodalSpan*, int64_t>> mm_src;
  for (const auto& s : plan.scheduled) {
    const Sequence& seq = *s.seq;
    const models::MultimodalPrompt* mm = seqs_.at(seq.id)->mm.get();
    const int64_t begin = seq.num_computed, end = seq.num_computed + s.num_tokens;
    const auto row0 = static_cast<int64_t>(batch.token_ids.size());
    for (int64_t p = begin; p < end; ++p) {
      batch.token_ids.push_back(seq.tokens[static_cast<size_t>(p)]);
      int32_t t = static_cast<int32_t>(p), h = t, w = t;
      if (mm != nullptr) {
        const auto n = static_cast<int64_t>(mm->token_ids.size());
        if (p < n) {
          t = mm->mrope_positions[static_cast<size_t>(p)];
          h = mm->mrope_positions[static_cast<size_t>(n + p)];
          w = mm->mrope_positions[static_cast<size_t>(2 * n + p)];
          need_mrope = need_mrope || h != t || w != t;
        } else {
          t = h = w = static_cast<int32_t>(p + mm->rope_delta);
        }
      }
      batch.positions.push_back(t);
      pos_h.push_back(h);
      pos_w.push_back(w);
      const int32_t block = seq.blocks[static_cast<size_t>(p / config_.block_size)];
      batch.slot_mapping.push_back(block * config_.block_size + static_cast<int32_t>(p % config_.block_size));
    }
    if (mm != nullptr) {
      for (const auto& span : mm->spans) {
        const int64_t a = std::max(begin, span.offset), b = std::min(end, span.offset + span.length);
        for (int64_t p = a; p < b; ++p) {
          batch.mm_rows.push_back(static_cast<int32_t>(row0 + p - begin));
          mm_src.emplace_back(&span, p - span.offset);
        }
      }
    }
    batch.q_indptr.push_back(static_cast<int32_t>(batch.token_ids.size()));
    batch.kv_lens.push_back(static_cast<int32_t>(seq.num_computed + s.num_tokens));
    for (int32_t i = 0; i < max_blocks; ++i)
      batch.block_table.push_back(
          i < static_cast<int32_t>(seq.blocks.size()) ? seq.blocks[static_cast<size_t>(i)] : 0);
    if (s.samples()) batch.logits_rows.push_back(batch.q_indptr.back() - 1);
  }
  if (need_mrope) {
    batch.mrope_positions = batch.positions;
    batch.mrope_positions.insert(batch.mrope_positions.end(), pos_h.begin(), pos_h.end());
    batch.mrope_positions.insert(batch.mrope_positions.end(), pos_w.begin(), pos_w.end());
  }
  if (!mm_src.empty()) gather_multimodal_rows(mm_src, batch);
  if (use_graph) {
    for (int32_t i = num_seqs; i < graph_batch; ++i) {  // padding: one token in the spare block
      batch.token_ids.push_back(0);
      batch.positions.push_back(0);
      batch.slot_mapping.push_back(spare_block_ * config_.block_size);
      batch.q_indptr.push_back(static_cast<int32_t>(batch.token_ids.size()));
      batch.kv_lens.push_back(1);
      batch.block_table.insert(batch.block_table.end(), static_cast<size_t>(max_blocks), spare_block_);
      batch.logits_rows.push_back(batch.q_indptr.back() - 1);
    }
    batch.max_kv_len_bound = kv_bound;
    batch.graph_key = (static_cast<uint64_t>(graph_batch) << 32) | static_cast<uint32_t>(kv_bound);
  }

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
    const core::Tensor real_rows = logits_.slice_rows(0, static_cast<int64_t>(sampling.size()));
    LOOM_CHECK(model_->backend().sample(real_rows, rows, &dres)) << "device logits but no device sampler";
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
