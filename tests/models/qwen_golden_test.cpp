// The Qwen text decoders against transformers (f32 on CPU): per-layer hidden states over the
// prompt, greedy tokens and top-5 logprobs per step, and prompt rendering + tokenization.
// Goldens: tools/reference/make_tiny_models.py.
#include <gtest/gtest.h>

#include <map>

#include "backends/cpu/cpu_ops.h"
#include "golden.h"
#include "models/checkpoint/checkpoint.h"
#include "models/registry.h"
#include "ops/reference_ops.h"
#include "server/chat_service.h"

namespace loom::testing {
namespace {

using nlohmann::json;

// f32 CPU vs transformers f32. Both upcast the same bf16 weights exactly; differences come from
// summation order (GEMM blocking, softmax) and libm's exp/cos, which stay near 1e-6 relative
// per op. Over a few layers with O(1..10) activations the error stays well below these bounds.
constexpr double kHiddenRelL2 = 1e-5;
constexpr double kHiddenMaxAbs = 1e-4;  // activations are O(1..10)
constexpr double kLogprobAbs = 1e-4;    // per top-5 logprob
// Greedy tokens must match exactly where the reference's top-1/top-2 margin is above this.
constexpr double kMarginForExactTokens = 1e-3;

const char* kModels[] = {"qwen2-tiny", "qwen3-tiny", "qwen3-gqa-tiny", "qwen2-window-tiny"};

enum class Backend { kReference, kCpu };

std::unique_ptr<ops::Ops> make_ops(Backend b) {
  return b == Backend::kReference ? ops::make_reference_ops() : backends::cpu::make_cpu_ops(2);
}

class QwenGolden : public ::testing::TestWithParam<std::tuple<const char*, Backend>> {};

TEST_P(QwenGolden, HiddenStatesMatchTransformers) {
  const std::string name = std::get<0>(GetParam());
  auto ops = make_ops(std::get<1>(GetParam()));
  auto cfg = models::load_model_config(model_dir(name));
  ASSERT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto model = models::load_causal_lm(model_dir(name), *cfg, *ops, {});
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto hidden = models::Checkpoint::open(golden_dir(name));
  ASSERT_TRUE(hidden.ok()) << hidden.status().to_string();
  const json cases = load_cases(name);
  const int64_t layers = cases["num_hidden_layers"];

  for (const auto& c : cases["cases"]) {
    const std::vector<int32_t> ids = c["prompt_ids"];
    const auto T = static_cast<int32_t>(ids.size());
    models::ForwardBatch b;
    b.token_ids = ids;
    b.block_size = 16;
    const int32_t nblocks = (T + 15) / 16;
    // Non-contiguous, descending block ids: the block table must be honoured.
    for (int32_t i = 0; i < nblocks; ++i) b.block_table.push_back(2 * (nblocks - i));
    b.max_blocks_per_seq = nblocks;
    for (int32_t p = 0; p < T; ++p) {
      b.positions.push_back(p);
      b.slot_mapping.push_back(b.block_table[p / 16] * 16 + p % 16);
    }
    b.q_indptr = {0, T};
    b.kv_lens = {T};
    b.logits_rows = {T - 1};
    std::vector<models::LayerKv> kv(static_cast<size_t>(layers));
    for (auto& l : kv) {
      core::Shape s = {2 * nblocks + 1, 16, (*model)->num_kv_heads(), (*model)->head_dim()};
      l.k = core::Tensor::zeros(s, core::DType::kF32);
      l.v = core::Tensor::zeros(s, core::DType::kF32);
    }
    std::map<std::string, core::Tensor> dumped;
    models::DumpHook hook = [&](std::string_view n, const core::Tensor& t) {
      core::Tensor copy = core::Tensor::empty(t.shape(), core::DType::kF32);
      std::memcpy(copy.data(), t.data(), t.nbytes());
      dumped[std::string(n)] = copy;
    };
    core::Tensor logits;
    ASSERT_TRUE((*model)->forward(b, kv, logits, &hook).ok());

    std::vector<std::string> names = {"embed", "final_norm"};
    for (int64_t i = 0; i + 1 < layers; ++i) names.push_back("blk." + std::to_string(i) + ".out");
    dumped["prompt_logits"] = logits;
    names.push_back("prompt_logits");
    for (const auto& n : names) {
      const std::string key = c["name"].get<std::string>() + "." + n;
      auto ref = hidden->get(key);
      ASSERT_TRUE(ref.ok()) << key;
      ASSERT_TRUE(dumped.count(n)) << "model did not dump " << n;
      const core::Tensor& ours = dumped[n];
      ASSERT_EQ(ours.numel(), ref->numel()) << key;
      Diff d =
          compare(ours.data_as<float>(), ref->to_f32().data_as<float>(), static_cast<size_t>(ours.numel()));
      EXPECT_FALSE(d.has_nan) << key;
      EXPECT_LT(d.rel_l2, kHiddenRelL2) << key << " max_abs " << d.max_abs;
      EXPECT_LT(d.max_abs, kHiddenMaxAbs * 10) << key;  // logits are O(10): scale the bound
      if (n != "prompt_logits") EXPECT_LT(d.max_abs, kHiddenMaxAbs) << key << " rel_l2 " << d.rel_l2;
      RecordProperty(key + ".rel_l2", std::to_string(d.rel_l2));
    }
  }
}

TEST_P(QwenGolden, GreedyGenerationMatchesTransformers) {
  const std::string name = std::get<0>(GetParam());
  server::ServiceOptions opt;
  opt.model_dir = model_dir(name);
  opt.threads = 2;
  auto svc = server::ChatService::load(opt);
  ASSERT_TRUE(svc.ok()) << svc.status().to_string();
  const json cases = load_cases(name);
  for (const auto& c : cases["cases"]) {
    json body = {{"messages", c["messages"]}, {"temperature", 0},  {"max_tokens", c["max_tokens"]},
                 {"logprobs", true},          {"top_logprobs", 5}, {"stop_token_ids", json::array()}};
    auto req = server::parse_chat_request(body, (*svc)->sampling_defaults());
    ASSERT_TRUE(req.ok()) << req.status().to_string();
    auto prompt = (*svc)->render_prompt(*req);
    ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
    EXPECT_EQ(*prompt, c["prompt"].get<std::string>()) << c["name"];
    auto result = (*svc)->complete(*req);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->prompt_token_ids, c["prompt_ids"].get<std::vector<int32_t>>()) << c["name"];
    const auto& choice = result->choices.at(0);
    const auto& steps = c["steps"];
    // transformers stops at eos too; compare the common prefix and then the lengths.
    for (size_t i = 0; i < steps.size() && i < choice.token_ids.size(); ++i) {
      const auto& s = steps[i];
      if (s["margin"].get<double>() > kMarginForExactTokens)
        ASSERT_EQ(choice.token_ids[i], s["token"].get<int32_t>()) << c["name"] << " step " << i;
      const auto& top = choice.samples[i].top;
      ASSERT_EQ(top.size(), 5u);
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_EQ(top[k].token, s["top5"][k][0].get<int32_t>())
            << c["name"] << " step " << i << " rank " << k;
        EXPECT_NEAR(top[k].logprob, s["top5"][k][1].get<double>(), kLogprobAbs) << c["name"] << " step " << i;
      }
      EXPECT_NEAR(choice.samples[i].logprob, s["logprob"].get<double>(), kLogprobAbs);
    }
    EXPECT_EQ(choice.token_ids.size(), steps.size()) << c["name"];
    EXPECT_EQ(choice.text, c["output_text"].get<std::string>()) << c["name"];
  }
}

INSTANTIATE_TEST_SUITE_P(Models, QwenGolden,
                         ::testing::Combine(::testing::ValuesIn(kModels),
                                            ::testing::Values(Backend::kReference, Backend::kCpu)),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param);
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n + (std::get<1>(info.param) == Backend::kReference ? "_ref" : "_cpu");
                         });

}  // namespace
}  // namespace loom::testing
