// The Qwen decoders on the CUDA backend (bf16 activations and KV cache) against the
// transformers f32 goldens that the CPU path matches to 1e-5: prompt logits within a bf16 bound,
// greedy tokens equal while the reference's top-1/top-2 margin is above the bf16 noise, and
// continuous batching on the GPU giving the same tokens as one sequence at a time.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include "golden.h"
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
    size_t compared = 0;
    for (size_t i = 0; i < steps.size() && i < choice.token_ids.size(); ++i) {
      EXPECT_NEAR(choice.samples[i].logprob, steps[i]["logprob"].get<double>(), kLogprobAbs)
          << name << "/" << c["name"] << " step " << i;
      if (steps[i]["margin"].get<double>() < kMargin) break;  // bf16 may legitimately pick the runner-up
      ASSERT_EQ(choice.token_ids[i], steps[i]["token"].get<int32_t>())
          << name << "/" << c["name"] << " step " << i;
      ++compared;
    }
    EXPECT_GE(compared, 1u) << name << "/" << c["name"] << ": no step had a margin above " << kMargin;
  }
}

TEST_P(QwenCuda, BatchedEqualsSequential) {
  const std::string name = GetParam();
  server::ServiceOptions opt;
  opt.model_dir = model_dir(name);
  opt.device = "cuda";
  opt.gpu_memory_utilization = 0.3;
  opt.engine.scheduler.max_num_batched_tokens = 16;  // chunked prefill mixed with decode
  opt.engine.block_size = 16;
  auto svc = server::ChatService::load(opt);
  ASSERT_TRUE(svc.ok()) << svc.status().to_string();
  const json cases = load_cases(name);
  // n = 3 greedy... is rejected (n > 1 needs sampling), so use a seeded sampler: the three
  // choices run batched; each must equal the same seed run alone.
  json body = {{"messages", cases["cases"][0]["messages"]},
               {"temperature", 0.8},
               {"seed", 7},
               {"max_tokens", 12},
               {"n", 3},
               {"ignore_eos", true}};
  auto req = server::parse_chat_request(nlohmann::ordered_json(body), (*svc)->sampling_defaults());
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  auto batched = (*svc)->complete(*req);
  ASSERT_TRUE(batched.ok()) << batched.status().to_string();
  ASSERT_EQ(batched->choices.size(), 3u);
  for (const auto& ch : batched->choices) EXPECT_EQ(ch.token_ids.size(), 12u);
  // The first choice (seed + 0) alone must give the same tokens.
  body["n"] = 1;
  auto req1 = server::parse_chat_request(nlohmann::ordered_json(body), (*svc)->sampling_defaults());
  ASSERT_TRUE(req1.ok());
  auto alone = (*svc)->complete(*req1);
  ASSERT_TRUE(alone.ok()) << alone.status().to_string();
  EXPECT_EQ(alone->choices[0].token_ids, batched->choices[0].token_ids);
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
