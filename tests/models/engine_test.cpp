// Block manager, scheduler and the engine's continuous batching: a batch of sequences with
// chunked prefill, tiny blocks and preemption must give the same tokens as running each
// sequence alone.
#include <gtest/gtest.h>

#include <map>

#include "backends/cpu/cpu_ops.h"
#include "engine/engine.h"
#include "golden.h"
#include "models/registry.h"

namespace loom::testing {
namespace {

using engine::BlockManager;
using engine::Scheduler;
using engine::SchedulerConfig;
using engine::Sequence;

TEST(BlockManager, AllocatesAllOrNothingAndReleases) {
  BlockManager bm(4, 16);
  std::vector<int32_t> a, b;
  ASSERT_TRUE(bm.ensure_capacity(a, 33));  // 3 blocks
  EXPECT_EQ(a.size(), 3u);
  EXPECT_EQ(bm.num_free(), 1);
  EXPECT_FALSE(bm.ensure_capacity(b, 17));  // needs 2, 1 free: nothing taken
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(bm.num_free(), 1);
  ASSERT_TRUE(bm.ensure_capacity(a, 48));  // still 3 blocks
  EXPECT_EQ(a.size(), 3u);
  bm.release(a);
  EXPECT_EQ(bm.num_free(), 4);
  ASSERT_TRUE(bm.ensure_capacity(b, 64));
  EXPECT_EQ(b.size(), 4u);
}

Sequence make_seq(int64_t id, int64_t prompt_len) {
  Sequence s;
  s.id = id;
  s.tokens.assign(static_cast<size_t>(prompt_len), 1);
  s.prompt_len = prompt_len;
  return s;
}

TEST(Scheduler, ChunksPrefillUnderTheTokenBudget) {
  BlockManager bm(64, 4);
  Scheduler sched(SchedulerConfig{10, 8}, bm);
  Sequence a = make_seq(1, 25), b = make_seq(2, 3);
  sched.add(&a);
  sched.add(&b);
  auto p1 = sched.schedule();
  ASSERT_EQ(p1.scheduled.size(), 1u);  // a takes the whole budget
  EXPECT_EQ(p1.scheduled[0].num_tokens, 10);
  EXPECT_FALSE(p1.scheduled[0].samples());
  sched.commit(p1);
  auto p2 = sched.schedule();
  ASSERT_EQ(p2.scheduled.size(), 1u);
  EXPECT_EQ(p2.scheduled[0].num_tokens, 10);
  sched.commit(p2);
  auto p3 = sched.schedule();  // a finishes its prefill (5), b gets 3
  ASSERT_EQ(p3.scheduled.size(), 2u);
  EXPECT_EQ(p3.scheduled[0].num_tokens, 5);
  EXPECT_TRUE(p3.scheduled[0].samples());
  EXPECT_EQ(p3.scheduled[1].seq, &b);
  EXPECT_EQ(p3.scheduled[1].num_tokens, 3);
  EXPECT_EQ(p3.num_tokens, 8);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  BlockManager bm(4, 4);  // 16 tokens of KV
  Scheduler sched(SchedulerConfig{64, 8}, bm);
  Sequence a = make_seq(1, 8), b = make_seq(2, 8);
  sched.add(&a);
  sched.add(&b);
  auto p1 = sched.schedule();
  ASSERT_EQ(p1.scheduled.size(), 2u);
  sched.commit(p1);
  a.tokens.push_back(7);  // both sampled a token: each needs a third block now
  b.tokens.push_back(7);
  auto p2 = sched.schedule();
  ASSERT_EQ(p2.scheduled.size(), 1u);
  EXPECT_EQ(p2.scheduled[0].seq, &a);
  EXPECT_EQ(b.num_computed, 0);  // preempted: recomputed later
  EXPECT_TRUE(b.blocks.empty());
  EXPECT_EQ(sched.num_preemptions(), 1);
  EXPECT_EQ(sched.num_waiting(), 1u);
}

struct RunResult {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
};

std::vector<RunResult> run(const std::vector<std::vector<int32_t>>& prompts, engine::EngineConfig cfg,
                           int max_tokens, int64_t* preemptions = nullptr) {
  auto ops = backends::cpu::make_cpu_ops(2);
  const std::string dir = model_dir("qwen3-tiny");
  auto mc = models::load_model_config(dir);
  EXPECT_TRUE(mc.ok());
  auto model = models::load_causal_lm(dir, *mc, *ops, {});
  EXPECT_TRUE(model.ok());
  auto tok = text::Tokenizer::from_file(dir + "/tokenizer.json");
  EXPECT_TRUE(tok.ok());
  engine::Engine eng(std::move(*model), *tok, cfg);
  engine::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  p.logprobs = 1;
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto id = eng.add_sequence(prompts[i], p);
    EXPECT_TRUE(id.ok()) << id.status().to_string();
    index[*id] = i;
  }
  std::vector<RunResult> out(prompts.size());
  while (eng.has_unfinished()) {
    auto step = eng.step();
    EXPECT_TRUE(step.ok()) << step.status().to_string();
    if (!step.ok()) break;
    for (const auto& o : *step) {
      auto& r = out[index.at(o.seq_id)];
      r.tokens.insert(r.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      for (const auto& s : o.new_samples) r.logprobs.push_back(s.logprob);
    }
  }
  if (preemptions != nullptr) *preemptions = eng.scheduler().num_preemptions();
  return out;
}

TEST(Engine, ContinuousBatchingMatchesSequentialRuns) {
  const nlohmann::json cases = load_cases("qwen3-tiny");
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : cases["cases"]) prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  prompts.push_back({5, 6, 7});  // a very short one
  const int kTokens = 9;

  std::vector<RunResult> alone;
  for (const auto& p : prompts) alone.push_back(run({p}, engine::EngineConfig{}, kTokens)[0]);

  struct Variant {
    const char* name;
    int32_t block_size;
    int32_t budget;
    int64_t kv_tokens;
  };
  // Chunked prefill (budget 7) with block size 1; block size 16 with a budget that batches
  // prefill and decode together; a KV cache (35 blocks of 4) that admits all four prompts
  // (33 blocks) but not their growth, which forces preemption and recomputation.
  for (const Variant v : {Variant{"chunked_bs1", 1, 7, 0}, Variant{"mixed_bs16", 16, 64, 0},
                          Variant{"preempting", 4, 2048, 140}}) {
    engine::EngineConfig cfg;
    cfg.block_size = v.block_size;
    cfg.scheduler.max_num_batched_tokens = v.budget;
    cfg.max_model_len = 100;
    cfg.kv_cache_tokens = v.kv_tokens;
    int64_t preemptions = 0;
    auto together = run(prompts, cfg, kTokens, &preemptions);
    if (v.kv_tokens > 0) EXPECT_GT(preemptions, 0) << v.name << " did not exercise preemption";
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << v.name << " prompt " << i;
      ASSERT_EQ(together[i].logprobs.size(), alone[i].logprobs.size());
      for (size_t k = 0; k < alone[i].logprobs.size(); ++k)
        EXPECT_NEAR(together[i].logprobs[k], alone[i].logprobs[k], 1e-4) << v.name;
    }
  }
}

TEST(Engine, RejectsPromptsThatDoNotFit) {
  auto ops = backends::cpu::make_cpu_ops(1);
  const std::string dir = model_dir("qwen3-tiny");
  auto mc = models::load_model_config(dir);
  auto model = models::load_causal_lm(dir, *mc, *ops, {});
  auto tok = text::Tokenizer::from_file(dir + "/tokenizer.json");
  ASSERT_TRUE(model.ok() && tok.ok());
  engine::EngineConfig cfg;
  cfg.max_model_len = 32;
  engine::Engine eng(std::move(*model), *tok, cfg);
  engine::SamplingParams p;
  auto too_long = eng.add_sequence(std::vector<int32_t>(32, 5), p);
  EXPECT_EQ(too_long.status().code(), core::StatusCode::kOutOfRange);
  p.max_tokens = 20;
  auto no_room = eng.add_sequence(std::vector<int32_t>(20, 5), p);
  EXPECT_EQ(no_room.status().code(), core::StatusCode::kOutOfRange);
  auto bad_id = eng.add_sequence({1, 999999}, engine::SamplingParams{});
  EXPECT_EQ(bad_id.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_FALSE(eng.has_unfinished());
}

}  // namespace
}  // namespace loom::testing
