// The Qwen decoders on the CUDA backend (bf16 activations and KV cache) against the
// transformers f32 goldens that the CPU path matches to 1e-5: prompt logits within a bf16 bound,
// greedy tokens equal while the reference's top-1/top-2 margin is above the bf16 noise, and
// continuous batching on the GPU giving the same tokens as one sequence at a time.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <map>
#include "golden.h"

#include "engine/engine.h"
#include "models/registry.h"
#include "server/backend_factory.h"
#include "server/chat_service.h"

namespace loom::testing {
namespace {

using nlohmann::json;

// bf16 activations (8 mantissa bits) through 2-3 layers of O(1..10) values: logits carry
// ~1e-2 relative error. Greedy tokens are compared only while the reference margin is above
// kMargin, and logprobs within kLogprobAbs.
constexpr double kLogitsRelL2 = 3e-2;
constexpr double kMargin = 0.25;
constexpr double kLogprobAbs = 0.15;

bool have_gpu(std::string* why) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess || n == 0) {
    *why = std::string("no CUDA device: ") + (err != cudaSuccess ? cudaGetErrorString(err) : "count is 0");
    return false;
  }
  return true;
}

class QwenCuda : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    std::string why;
    if (!have_gpu(&why)) GTEST_SKIP() << why;
  }
};

TEST_P(QwenCuda, GreedyMatchesTransformers) {
  const std::string name = GetParam();
  server::ServiceOptions opt;
  opt.model_dir = model_dir(name);
  opt.device = "cuda";
  opt.gpu_memory_utilization = 0.3;
  auto svc = server::ChatService::load(opt);
  ASSERT_TRUE(svc.ok()) << svc.status().to_string();
  const json cases = load_cases(name);
  size_t compared = 0;
  for (const auto& c : cases["cases"]) {
    json body = {{"messages", c["messages"]},
                 {"temperature", 0},
                 {"max_tokens", c["max_tokens"]},
                 {"logprobs", true},
                 {"top_logprobs", 5}};
    auto req = server::parse_chat_request(nlohmann::ordered_json(body), (*svc)->sampling_defaults());
    ASSERT_TRUE(req.ok()) << req.status().to_string();
    auto result = (*svc)->complete(*req);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>());
    const auto& choice = result->choices.at(0);
    const auto& steps = c["steps"];
    // Tokens must agree until the first step whose reference margin is within bf16 noise; a
    // divergence at a step with a clear margin is a bug.
    for (size_t i = 0; i < steps.size() && i < choice.token_ids.size(); ++i) {
      EXPECT_NEAR(choice.samples[i].logprob, steps[i]["logprob"].get<double>(), kLogprobAbs)
          << name << "/" << c["name"] << " step " << i;
      if (choice.token_ids[i] == steps[i]["token"].get<int32_t>()) {
        ++compared;
        continue;
      }
      EXPECT_LT(steps[i]["margin"].get<double>(), kMargin)
          << name << "/" << c["name"] << " step " << i << ": token " << choice.token_ids[i] << " vs "
          << steps[i]["token"];
      break;
    }
  }
  EXPECT_GE(compared, 3u) << name << ": too few tokens matched to say anything";
}

// Sequences batched together (chunked prefill mixed with decode, several sequences per
// forward) against each sequence alone, greedy. bf16 GEMMs of different batch shapes round
// differently, so tokens must agree until the first step where the alone run's own top-1/top-2
// margin is within bf16 noise.
TEST_P(QwenCuda, BatchedEqualsSequential) {
  const std::string name = GetParam();
  const nlohmann::json cases = load_cases(name);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : cases["cases"]) prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  auto run = [&](const std::vector<std::vector<int32_t>>& ps, int32_t budget) {
    server::BackendOptions bo;
    bo.device = "cuda";
    bo.gpu_memory_utilization = 0.3;
    auto ops = server::make_backend(bo);
    EXPECT_TRUE(ops.ok()) << ops.status().to_string();
    auto mc = models::load_model_config(model_dir(name));
    auto model = models::load_causal_lm(model_dir(name), *mc, **ops, {});
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    auto tok = text::Tokenizer::from_file(model_dir(name) + "/tokenizer.json");
    engine::EngineConfig ec;
    ec.scheduler.max_num_batched_tokens = budget;
    ec.max_model_len = 256;
    engine::Engine eng(std::move(*model), *tok, ec);
    engine::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 10;
    p.ignore_eos = true;
    p.logprobs = 2;
    std::map<int64_t, size_t> index;
    for (size_t i = 0; i < ps.size(); ++i) index[*eng.add_sequence(ps[i], p)] = i;
    std::vector<std::vector<engine::SampleResult>> out(ps.size());
    while (eng.has_unfinished()) {
      auto r = eng.step();
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (!r.ok()) break;
      for (const auto& o : *r)
        for (const auto& s : o.new_samples) out[index.at(o.seq_id)].push_back(s);
    }
    return out;
  };
  auto together = run(prompts, 16);
  size_t compared = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto alone = run({prompts[i]}, 2048)[0];
    ASSERT_EQ(alone.size(), together[i].size());
    for (size_t k = 0; k < alone.size(); ++k) {
      if (alone[k].token == together[i][k].token) {
        ++compared;
        continue;
      }
      const double margin = alone[k].top[0].logprob - alone[k].top[1].logprob;
      EXPECT_LT(margin, kMargin) << name << " prompt " << i << " step " << k;
      break;
    }
  }
  EXPECT_GE(compared, 5u) << name;
}

// Decode steps replayed from CUDA graphs (batch padded to a capture bucket, attention planned
// for a power-of-two context bound) against the same engine run eagerly. Sequences stop at
// different lengths so the batch shrinks through several buckets (4 -> 2 -> 1) and graphs are
// warmed, captured and replayed; greedy tokens must agree until the eager run's own margin is
// within bf16 noise, and logprobs within the bf16 bound.
TEST_P(QwenCuda, GraphsEqualEager) {
  const std::string name = GetParam();
  const nlohmann::json cases = load_cases(name);
  std::vector<std::vector<int32_t>> prompts;
  for (const auto& c : cases["cases"]) prompts.push_back(c["prompt_ids"].get<std::vector<int32_t>>());
  while (prompts.size() < 3) prompts.push_back(prompts.front());
  auto run = [&](bool graphs) {
    server::BackendOptions bo;
    bo.device = "cuda";
    bo.gpu_memory_utilization = 0.3;
    auto ops = server::make_backend(bo);
    EXPECT_TRUE(ops.ok()) << ops.status().to_string();
    auto mc = models::load_model_config(model_dir(name));
    auto model = models::load_causal_lm(model_dir(name), *mc, **ops, {});
    EXPECT_TRUE(model.ok()) << model.status().to_string();
    auto tok = text::Tokenizer::from_file(model_dir(name) + "/tokenizer.json");
    engine::EngineConfig ec;
    ec.max_model_len = 512;
    ec.cuda_graphs = graphs;
    engine::Engine eng(std::move(*model), *tok, ec);
    std::map<int64_t, size_t> index;
    for (size_t i = 0; i < prompts.size(); ++i) {
      engine::SamplingParams p;
      p.temperature = 0;
      p.max_tokens = 6 + 7 * static_cast<int32_t>(i);
      p.ignore_eos = true;
      p.logprobs = 2;
      index[*eng.add_sequence(prompts[i], p)] = i;
    }
    std::vector<std::vector<engine::SampleResult>> out(prompts.size());
    while (eng.has_unfinished()) {
      auto r = eng.step();
      EXPECT_TRUE(r.ok()) << r.status().to_string();
      if (!r.ok()) break;
      for (const auto& o : *r)
        for (const auto& s : o.new_samples) out[index.at(o.seq_id)].push_back(s);
    }
    return out;
  };
  auto eager = run(false);
  auto graphed = run(true);
  size_t compared = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(eager[i].size(), graphed[i].size());
    for (size_t k = 0; k < eager[i].size(); ++k) {
      if (eager[i][k].token == graphed[i][k].token) {
        EXPECT_NEAR(eager[i][k].logprob, graphed[i][k].logprob, kLogprobAbs) << name << " " << i << "/" << k;
        ++compared;
        continue;
      }
      const double margin = eager[i][k].top[0].logprob - eager[i][k].top[1].logprob;
      EXPECT_LT(margin, kMargin) << name << " prompt " << i << " step " << k;
      break;
    }
  }
  EXPECT_GE(compared, 15u) << name;
}

INSTANTIATE_TEST_SUITE_P(Models, QwenCuda, ::testing::Values("qwen2-tiny", "qwen3-tiny", "qwen3-gqa-tiny"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace loom::testing
