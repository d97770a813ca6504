// parse_sampling_params / SamplingParams::validate / generation_config defaults.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"

namespace loom::engine {
namespace {

using nlohmann::json;

SamplingParams parse_ok(const json& req, const SamplingDefaults& d = {}) {
  auto p = parse_sampling_params(req, d);
  EXPECT_TRUE(p.ok()) << req.dump() << " -> " << p.status().to_string();
  return p.ok() ? *p : SamplingParams{};
}

TEST(SamplingParams, EmptyRequestGivesOpenAIDefaults) {
  SamplingParams p = parse_ok(json::object());
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0);
  EXPECT_EQ(p.repetition_penalty, 1.0);
  EXPECT_EQ(p.presence_penalty, 0.0);
  EXPECT_EQ(p.frequency_penalty, 0.0);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.max_tokens, -1);
  EXPECT_EQ(p.min_tokens, 0);
  EXPECT_TRUE(p.stop.empty());
  EXPECT_TRUE(p.stop_token_ids.empty());
  EXPECT_FALSE(p.ignore_eos);
  EXPECT_FALSE(p.include_stop_str_in_output);
  EXPECT_EQ(p.logprobs, -1);
  EXPECT_TRUE(p.logit_bias.empty());
  EXPECT_FALSE(p.is_greedy());
}

TEST(SamplingParams, ParsesEveryField) {
  const json req = json::parse(R"({
    "model": "m", "messages": [], "stream": true,
    "n": 3, "temperature": 0.6, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "repetition_penalty": 1.1, "presence_penalty": 0.5, "frequency_penalty": -0.5,
    "seed": 42, "max_tokens": 100, "min_tokens": 4,
    "stop": ["\n\n", "###"], "stop_token_ids": [7, 9, 7],
    "ignore_eos": true, "include_stop_str_in_output": true,
    "logprobs": true, "top_logprobs": 5,
    "logit_bias": {"15": 2.5, "99": -150}
  })");
  SamplingParams p = parse_ok(req);
  EXPECT_EQ(p.n, 3);
  EXPECT_EQ(p.temperature, 0.6);
  EXPECT_EQ(p.top_p, 0.9);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_EQ(p.min_p, 0.05);
  EXPECT_EQ(p.repetition_penalty, 1.1);
  EXPECT_EQ(p.presence_penalty, 0.5);
  EXPECT_EQ(p.frequency_penalty, -0.5);
  EXPECT_EQ(p.seed, 42u);
  EXPECT_EQ(p.max_tokens, 100);
  EXPECT_EQ(p.min_tokens, 4);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n\n", "###"}));
  EXPECT_EQ(p.stop_token_ids, (std::vector<int32_t>{7, 9}));  // deduplicated, order kept
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_TRUE(p.include_stop_str_in_output);
  EXPECT_EQ(p.logprobs, 5);
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.logit_bias[0], (std::pair<int32_t, float>{15, 2.5f}));
  EXPECT_EQ(p.logit_bias[1], (std::pair<int32_t, float>{99, -100.0f}));  // clamped to OpenAI's range
}

TEST(SamplingParams, FieldVariants) {
  // max_completion_tokens supersedes max_tokens.
  EXPECT_EQ(parse_ok({{"max_tokens", 50}, {"max_completion_tokens", 20}}).max_tokens, 20);
  EXPECT_EQ(parse_ok({{"max_completion_tokens", 20}}).max_tokens, 20);
  // stop as one string.
  EXPECT_EQ(parse_ok({{"stop", "END"}}).stop, (std::vector<std::string>{"END"}));
  // logprobs without top_logprobs: only the sampled token; false: none.
  EXPECT_EQ(parse_ok({{"logprobs", true}}).logprobs, 0);
  EXPECT_EQ(parse_ok({{"logprobs", false}, {"top_logprobs", 0}}).logprobs, -1);
  // seed -1 means none (vLLM); negative seeds are kept as their 64-bit pattern.
  EXPECT_FALSE(parse_ok({{"seed", -1}}).seed.has_value());
  EXPECT_EQ(parse_ok({{"seed", -5}}).seed, static_cast<uint64_t>(-5));
  // null is "not set".
  EXPECT_EQ(parse_ok({{"temperature", nullptr}, {"stop", nullptr}}).temperature, 1.0);
  // Integral floats are integers (pydantic's lax mode).
  EXPECT_EQ(parse_ok({{"max_tokens", 16.0}}).max_tokens, 16);
  // -1 disables top_k like 0; huge top_k saturates (vLLM accepts sys.maxsize).
  EXPECT_EQ(parse_ok({{"top_k", -1}}).top_k, -1);
  EXPECT_EQ(parse_ok({{"top_k", 9223372036854775807LL}}).top_k, 2147483647);
  // top_k 1 is greedy.
  EXPECT_TRUE(parse_ok({{"top_k", 1}}).is_greedy());
}

TEST(SamplingParams, GreedyResetsFiltersAndRequiresNOne) {
  SamplingParams p = parse_ok({{"temperature", 0}, {"top_p", 0.5}, {"top_k", 5}, {"min_p", 0.2}});
  EXPECT_TRUE(p.is_greedy());
  EXPECT_EQ(p.top_p, 1.0);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.min_p, 0.0);
  auto bad = parse_sampling_params({{"temperature", 0}, {"n", 2}}, {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("n must be 1"), std::string::npos) << bad.status().message();
}

TEST(SamplingParams, EachBadFieldGivesAnErrorNamingIt) {
  struct Case {
    const char* json;
    const char* field;
  };
  const Case cases[] = {
      {R"({"temperature": "hot"})", "temperature"},
      {R"({"temperature": -0.1})", "temperature"},
      {R"({"temperature": 2.5})", "temperature"},
      {R"({"temperature": true})", "temperature"},
      {R"({"top_p": 0})", "top_p"},
      {R"({"top_p": 1.5})", "top_p"},
      {R"({"top_p": [1]})", "top_p"},
      {R"({"top_k": -2})", "top_k"},
      {R"({"top_k": 1.5})", "top_k"},
      {R"({"min_p": 1.5})", "min_p"},
      {R"({"min_p": -0.1})", "min_p"},
      {R"({"repetition_penalty": 0})", "repetition_penalty"},
      {R"({"repetition_penalty": "1"})", "repetition_penalty"},
      {R"({"presence_penalty": 2.5})", "presence_penalty"},
      {R"({"frequency_penalty": -3})", "frequency_penalty"},
      {R"({"frequency_penalty": {}})", "frequency_penalty"},
      {R"({"n": 0})", "n"},
      {R"({"n": "2"})", "n"},
      {R"({"n": 1e12})", "n"},
      {R"({"max_tokens": 0})", "max_tokens"},
      {R"({"max_tokens": "10"})", "max_tokens"},
      {R"({"max_completion_tokens": -3})", "max_completion_tokens"},
      {R"({"max_completion_tokens": 2.5})", "max_completion_tokens"},
      {R"({"min_tokens": -1})", "min_tokens"},
      {R"({"min_tokens": 10, "max_tokens": 5})", "min_tokens"},
      {R"({"stop": 5})", "stop"},
      {R"({"stop": ["a", 1]})", "stop[1]"},
      {R"({"stop": [""]})", "stop"},
      {R"({"stop_token_ids": "7"})", "stop_token_ids"},
      {R"({"stop_token_ids": [1.5]})", "stop_token_ids[0]"},
      {R"({"stop_token_ids": [-4]})", "stop_token_ids"},
      {R"({"seed": "x"})", "seed"},
      {R"({"seed": 1.5})", "seed"},
      {R"({"seed": 18446744073709551615})", "seed"},
      {R"({"logprobs": 1})", "logprobs"},
      {R"({"logprobs": true, "top_logprobs": 21})", "top_logprobs"},
      {R"({"logprobs": true, "top_logprobs": -1})", "top_logprobs"},
      {R"({"top_logprobs": 3})", "top_logprobs"},
      {R"({"logit_bias": [1, 2]})", "logit_bias"},
      {R"({"logit_bias": {"abc": 1}})", "logit_bias"},
      {R"({"logit_bias": {"-3": 1}})", "logit_bias"},
      {R"({"logit_bias": {"5": "big"}})", "logit_bias"},
      {R"({"ignore_eos": "yes"})", "ignore_eos"},
      {R"({"include_stop_str_in_output": 1})", "include_stop_str_in_output"},
  };
  for (const Case& c : cases) {
    auto p = parse_sampling_params(json::parse(c.json), {});
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), core::StatusCode::kInvalidArgument) << c.json;
    EXPECT_EQ(p.status().message().rfind(c.field, 0), 0u)
        << c.json << " -> " << p.status().message() << " (should start with " << c.field << ")";
  }
  auto not_object = parse_sampling_params(json::array(), {});
  ASSERT_FALSE(not_object.ok());
  EXPECT_EQ(not_object.status().code(), core::StatusCode::kInvalidArgument);
}

TEST(SamplingParams, GenerationConfigSuppliesDefaults) {
  // Qwen2.5-Instruct's generation_config.json.
  const json gen = json::parse(R"({
    "bos_token_id": 151643, "do_sample": true, "eos_token_id": [151645, 151643],
    "pad_token_id": 151643, "repetition_penalty": 1.05, "temperature": 0.7,
    "top_p": 0.8, "top_k": 20, "transformers_version": "4.37.0"
  })");
  auto d = sampling_defaults_from_generation_config(gen);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  EXPECT_EQ(d->temperature, 0.7);
  EXPECT_EQ(d->top_p, 0.8);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_EQ(d->repetition_penalty, 1.05);
  EXPECT_FALSE(d->min_p.has_value());

  SamplingParams p = parse_ok(json::object(), *d);
  EXPECT_EQ(p.temperature, 0.7);
  EXPECT_EQ(p.top_p, 0.8);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.repetition_penalty, 1.05);
  EXPECT_EQ(p.min_p, 0.0);
  // The request wins where it speaks; null falls back to the default.
  SamplingParams q = parse_ok({{"temperature", 0.2}, {"top_k", nullptr}, {"top_p", 1.0}}, *d);
  EXPECT_EQ(q.temperature, 0.2);
  EXPECT_EQ(q.top_k, 20);
  EXPECT_EQ(q.top_p, 1.0);
  // Greedy requests drop the default filters.
  SamplingParams g = parse_ok({{"temperature", 0}}, *d);
  EXPECT_EQ(g.top_k, 0);
  EXPECT_EQ(g.top_p, 1.0);
  EXPECT_EQ(g.repetition_penalty, 1.05);  // penalties still apply to greedy

  auto bad = sampling_defaults_from_generation_config(json::parse(R"({"top_k": "20"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("generation_config.top_k", 0), 0u) << bad.status().message();
  EXPECT_FALSE(sampling_defaults_from_generation_config(json::array()).ok());
  EXPECT_TRUE(sampling_defaults_from_generation_config(json::object()).ok());
}

TEST(SamplingParams, ValidateTokenIdsAgainstVocab) {
  SamplingParams p;
  p.stop_token_ids = {3, 99};
  EXPECT_TRUE(p.validate_token_ids(100).ok());
  auto st = p.validate_token_ids(50);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("stop_token_ids", 0), 0u) << st.message();
  SamplingParams b;
  b.logit_bias = {{49, 1.0f}, {50, 1.0f}};
  st = b.validate_token_ids(50);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("logit_bias", 0), 0u) << st.message();
}

TEST(SamplingParams, ValidateCatchesDirectlyBuiltParams) {
  SamplingParams p;
  EXPECT_TRUE(p.validate().ok());
  p.logprobs = 21;
  EXPECT_FALSE(p.validate().ok());
  p.logprobs = 20;
  EXPECT_TRUE(p.validate().ok());
  p.max_tokens = 0;
  EXPECT_FALSE(p.validate().ok());
  p.max_tokens = -1;
  p.repetition_penalty = std::numeric_limits<double>::infinity();
  EXPECT_FALSE(p.validate().ok());
}

}  // namespace
}  // namespace loom::engine
