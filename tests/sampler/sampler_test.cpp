// Sampler: each logits processor on hand-computed values, greedy tie-breaks, logprobs, seeds, the
// empirical distribution of draws, and a golden comparison with transformers' logits processors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <random>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace loom::engine {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
using logits_ops::apply_min_p;
using logits_ops::apply_penalties;
using logits_ops::apply_top_k;
using logits_ops::apply_top_p;

std::vector<int32_t> kept(const std::vector<float>& logits) {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] != -kInf) ids.push_back(static_cast<int32_t>(i));
  }
  return ids;
}

// ---- individual processors, hand-computed ------------------------------------------------

TEST(LogitsOps, LogitBiasAddsAndRepeatsAccumulate) {
  std::vector<float> x = {1.0f, 2.0f, 3.0f};
  std::vector<std::pair<int32_t, float>> bias = {{0, 0.5f}, {2, -3.0f}, {0, 1.0f}};
  logits_ops::apply_logit_bias(x, bias);
  EXPECT_EQ(x, (std::vector<float>{2.5f, 2.0f, 0.0f}));
}

TEST(LogitsOps, PenaltiesMatchHandComputedValues) {
  // token: 0 prompt only; 1 prompt + output once; 2 output twice; 3, 4 unseen; 5 output once, logit 0.
  std::vector<float> x = {2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 0.0f};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> output = {1, 2, 2, 5};
  apply_penalties(x, prompt, output, /*repetition=*/2.0f, /*frequency=*/0.5f, /*presence=*/0.25f);
  EXPECT_FLOAT_EQ(x[0], 1.0f);                  // 2 / 2
  EXPECT_FLOAT_EQ(x[1], -2.0f - 0.5f - 0.25f);  // -1 * 2, - 0.5 * 1, - 0.25
  EXPECT_FLOAT_EQ(x[2], 0.25f - 1.0f - 0.25f);  // 0.5 / 2 once (presence, not count), - 0.5 * 2, - 0.25
  EXPECT_FLOAT_EQ(x[3], 3.0f);
  EXPECT_FLOAT_EQ(x[4], -2.0f);
  EXPECT_FLOAT_EQ(x[5], -0.75f);  // 0 * 2 = 0, - 0.5, - 0.25
}

TEST(LogitsOps, RepetitionBelowOneAndNegativePresenceEncourage) {
  std::vector<float> x = {2.0f, -2.0f, 1.0f};
  const std::vector<int32_t> prompt = {0, 1};
  const std::vector<int32_t> output = {2};
  apply_penalties(x, prompt, output, 0.5f, 0.0f, -1.0f);
  EXPECT_FLOAT_EQ(x[0], 4.0f);   // 2 / 0.5
  EXPECT_FLOAT_EQ(x[1], -1.0f);  // -2 * 0.5
  EXPECT_FLOAT_EQ(x[2], 3.0f);   // 1 / 0.5 + 1
}

TEST(LogitsOps, TemperatureDivides) {
  std::vector<float> x = {1.0f, 2.0f, -3.0f};
  logits_ops::apply_temperature(x, 0.5f);
  EXPECT_EQ(x, (std::vector<float>{2.0f, 4.0f, -6.0f}));
}

TEST(LogitsOps, MinPKeepsTokensWithinRatioOfTheTopOne) {
  // Relative probabilities exp(0), exp(-1), exp(-2), exp(-3); min_p = exp(-1.5) keeps the first two.
  std::vector<float> x = {0.0f, -1.0f, -2.0f, -3.0f};
  apply_min_p(x, std::exp(-1.5f));
  EXPECT_EQ(kept(x), (std::vector<int32_t>{0, 1}));
  // min_p = 1 keeps exactly the tied maxima.
  std::vector<float> y = {1.0f, 0.5f, 1.0f};
  apply_min_p(y, 1.0f);
  EXPECT_EQ(kept(y), (std::vector<int32_t>{0, 2}));
  // min_p = 0 is a no-op.
  std::vector<float> z = {0.0f, -50.0f};
  apply_min_p(z, 0.0f);
  EXPECT_EQ(kept(z), (std::vector<int32_t>{0, 1}));
}

TEST(LogitsOps, TopKKeepsAllTiesAtTheKthValue) {
  const std::vector<float> base = {1.0f, 3.0f, 3.0f, 2.0f, 3.0f, 0.0f};
  auto top = [&](int32_t k) {
    std::vector<float> x = base;
    apply_top_k(x, k);
    return kept(x);
  };
  EXPECT_EQ(top(1), (std::vector<int32_t>{1, 2, 4}));  // k-th (1st) value 3: all three 3s stay
  EXPECT_EQ(top(2), (std::vector<int32_t>{1, 2, 4}));
  EXPECT_EQ(top(4), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(top(5), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(top(0), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));   // disabled
  EXPECT_EQ(top(-1), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));  // disabled
  EXPECT_EQ(top(99), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));  // beyond vocab
}

TEST(LogitsOps, TopPKeepsSmallestPrefixReachingP) {
  // Probabilities 0.5, 0.3, 0.2 (as logs), listed out of order to exercise the sort.
  const std::vector<float> base = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  auto top = [&](float p) {
    std::vector<float> x = base;
    apply_top_p(x, p);
    return kept(x);
  };
  EXPECT_EQ(top(0.4f), (std::vector<int32_t>{1}));         // 0.5 alone reaches 0.4
  EXPECT_EQ(top(0.6f), (std::vector<int32_t>{1, 2}));      // 0.5 < 0.6, 0.8 reaches it
  EXPECT_EQ(top(0.85f), (std::vector<int32_t>{0, 1, 2}));  // needs all three
  EXPECT_EQ(top(0.01f), (std::vector<int32_t>{1}));        // the top token always stays
  EXPECT_EQ(top(1.0f), (std::vector<int32_t>{0, 1, 2}));   // disabled
}

TEST(LogitsOps, TopPBreaksTiesByLowerId) {
  // Four equal tokens (0.25 each): p = 0.3 keeps two, and they are the two lowest ids.
  std::vector<float> x(4, 0.0f);
  apply_top_p(x, 0.3f);
  EXPECT_EQ(kept(x), (std::vector<int32_t>{0, 1}));
  std::vector<float> y(4, 0.0f);
  apply_top_p(y, 0.2f);
  EXPECT_EQ(kept(y), (std::vector<int32_t>{0}));
  // Mass before token 2 is exactly 0.5 = p: it is dropped (vLLM: ascending cumsum 0.5 <= 1 - p).
  std::vector<float> z(4, 0.0f);
  apply_top_p(z, 0.5f);
  EXPECT_EQ(kept(z), (std::vector<int32_t>{0, 1}));
}

TEST(LogitsOps, TopPMatchesNaiveFullSortOnLargeVocab) {
  // Large, fairly flat vocabularies make the chunked selection grow several times.
  std::mt19937 gen(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int trial = 0; trial < 8; ++trial) {
    const size_t vocab = 3001 + 1000 * trial;
    std::vector<float> x(vocab);
    for (float& v : x) v = normal(gen) * (trial % 2 ? 0.3f : 0.8f);  // flat enough to need > 64 tokens
    if (trial >= 6) {
      for (float& v : x) v = std::round(v * 8.0f) / 8.0f;  // many exact ties, broken by id
    }
    x[17] = -kInf;  // an already masked token stays masked and is ignored
    const float p = 0.5f + 0.06f * trial;
    // Naive: sort everything by (logit desc, id asc), keep while the mass before < p.
    std::vector<int32_t> order(vocab);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    const float m = x[order[0]];
    double total = 0;
    for (float v : x) total += std::exp(v - m);
    std::vector<int32_t> expect;
    double before = 0;
    for (int32_t id : order) {
      if (x[id] == -kInf || before >= p * total) break;
      expect.push_back(id);
      before += std::exp(x[id] - m);
    }
    std::sort(expect.begin(), expect.end());
    std::vector<float> y = x;
    apply_top_p(y, p);
    EXPECT_EQ(kept(y), expect) << "vocab " << vocab << " p " << p;
    EXPECT_GT(expect.size(), 64u);  // really crossed a chunk boundary
  }
}

TEST(LogitsOps, ArgmaxTiesGoToLowestId) {
  EXPECT_EQ(logits_ops::argmax(std::vector<float>{1.0f, 5.0f, 5.0f, 2.0f}), 1);
  EXPECT_EQ(logits_ops::argmax(std::vector<float>{-kInf, -kInf}), -1);
}

TEST(LogitsOps, TopEntriesOrderedHighestFirstTiesByLowerId) {
  const std::vector<float> x = {0.5f, 2.0f, 1.0f, 2.0f, -kInf, 1.0f, 3.0f};
  auto top = logits_ops::top_k_entries(x, 4);
  ASSERT_EQ(top.size(), 4u);
  EXPECT_EQ(top[0].token, 6);
  EXPECT_EQ(top[1].token, 1);
  EXPECT_EQ(top[2].token, 3);
  EXPECT_EQ(top[3].token, 2);
  EXPECT_EQ(logits_ops::top_k_entries(x, 100).size(), x.size());
  EXPECT_TRUE(logits_ops::top_k_entries(x, 0).empty());
}

// ---- Sampler ------------------------------------------------------------------------------

TEST(Sampler, GreedyPicksArgmaxAfterPenaltiesWithLowestIdTieBreak) {
  Sampler sampler;
  SamplerRng rng(1);
  SamplingParams p;
  p.temperature = 0.0;
  const std::vector<float> tied = {1.0f, 5.0f, 5.0f, 2.0f};
  EXPECT_EQ(sampler.sample(tied, p, {}, {}, rng).token, 1);
  // top_k == 1 is greedy too, whatever the temperature.
  SamplingParams k1;
  k1.top_k = 1;
  for (int i = 0; i < 20; ++i) EXPECT_EQ(sampler.sample(tied, k1, {}, {}, rng).token, 1);
  // Penalties act before greedy: 5 / 1.1 < 4.9.
  SamplingParams rep = p;
  rep.repetition_penalty = 1.1;
  const std::vector<float> close = {5.0f, 4.9f};
  const std::vector<int32_t> out = {0};
  EXPECT_EQ(sampler.sample(close, p, {}, out, rng).token, 0);
  EXPECT_EQ(sampler.sample(close, rep, {}, out, rng).token, 1);
  // And logit_bias.
  SamplingParams bias = p;
  bias.logit_bias = {{0, -0.2f}};
  EXPECT_EQ(sampler.sample(close, bias, {}, {}, rng).token, 1);
}

TEST(Sampler, MinTokensMasksEosAndStopIdsUntilReached) {
  Sampler sampler({2});
  SamplerRng rng(1);
  SamplingParams p;
  p.temperature = 0.0;
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  const std::vector<float> x = {0.0f, 1.0f, 9.0f, 8.0f};  // eos (2) then stop id (3) lead
  const std::vector<int32_t> one = {1}, two = {1, 1};
  EXPECT_EQ(sampler.sample(x, p, {}, one, rng).token, 1);  // both masked
  EXPECT_EQ(sampler.sample(x, p, {}, two, rng).token, 2);  // min_tokens reached
  // Sampling never draws a masked token either.
  SamplingParams hot = p;
  hot.temperature = 1.0;
  for (int i = 0; i < 200; ++i) {
    int32_t t = sampler.sample(x, hot, {}, one, rng).token;
    EXPECT_TRUE(t == 0 || t == 1) << t;
  }
}

TEST(Sampler, LogprobsAreRawLogSoftmaxWithOrderedTop) {
  std::mt19937 gen(std::random_device{}());
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> x(1001);
  for (float& v : x) v = normal(gen);
  x[10] = x[20] = 50.0f;  // a tie at the top: id 10 first
  // Naive log_softmax in double.
  double m = *std::max_element(x.begin(), x.end()), s = 0;
  for (float v : x) s += std::exp(static_cast<double>(v) - m);
  auto naive = [&](int32_t i) { return static_cast<double>(x[i]) - m - std::log(s); };

  Sampler sampler;
  SamplerRng rng(7);
  SamplingParams p;
  p.temperature = 0.3;  // processing must not change the reported logprobs
  p.top_k = 3;
  p.repetition_penalty = 1.5;
  p.logprobs = 5;
  const std::vector<int32_t> prompt = {10};
  SampleResult r = sampler.sample(x, p, prompt, {}, rng);
  ASSERT_EQ(r.top.size(), 5u);
  EXPECT_EQ(r.top[0].token, 10);
  EXPECT_EQ(r.top[1].token, 20);
  std::vector<int32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  for (size_t i = 0; i < r.top.size(); ++i) {
    EXPECT_EQ(r.top[i].token, order[i]);
    EXPECT_NEAR(r.top[i].logprob, naive(order[i]), 2e-5);
  }
  EXPECT_NEAR(r.logprob, naive(r.token), 2e-5);
  // Penalised token 10 (50 / 1.5) loses to 20; top_k 3 leaves {20, 10, third}: sampled from those.
  EXPECT_TRUE(r.token == order[0] || r.token == order[1] || r.token == order[2]);

  // logprobs = 0: only the sampled token's logprob.
  p.logprobs = 0;
  r = sampler.sample(x, p, prompt, {}, rng);
  EXPECT_TRUE(r.top.empty());
  EXPECT_NEAR(r.logprob, naive(r.token), 2e-5);
  // A -inf raw logit has logprob -inf.
  std::vector<float> y = {0.0f, -kInf};
  p.temperature = 0;
  p.top_k = 0;
  p.logprobs = 2;
  r = sampler.sample(y, p, {}, {}, rng);
  EXPECT_EQ(r.top[1].logprob, -kInf);
  EXPECT_FLOAT_EQ(r.logprob, 0.0f);
}

TEST(Sampler, SeededDrawsAreReproducibleAndSeedsDiffer) {
  std::vector<float> x(64);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i)) * 2.0f;  // fixed, flat-ish
  Sampler sampler;
  SamplingParams p;
  p.temperature = 1.0;
  p.top_p = 0.95;
  auto run = [&](SamplerRng rng) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 200; ++i) tokens.push_back(sampler.sample(x, p, {}, tokens, rng).token);
    return tokens;
  };
  const auto a = run(SamplerRng(1234));
  EXPECT_EQ(a, run(SamplerRng(1234)));
  EXPECT_NE(a, run(SamplerRng(1235)));
  EXPECT_NE(run(SamplerRng(std::nullopt)), run(SamplerRng(std::nullopt)));
  // Sequence i of an n > 1 request uses seed + i (vLLM's child seeds).
  EXPECT_EQ(run(SamplerRng(1234, 1)), run(SamplerRng(1235)));
  // Golden values pin the generator itself (from an independent Python rendering of
  // splitmix64 + xoshiro256**): a changed algorithm would silently change every seeded completion.
  SamplerRng g(0);
  EXPECT_EQ(g.next_u64(), 0x99ec5f36cb75f2b4ULL);
  EXPECT_EQ(g.next_u64(), 0xbf6e1f784956452aULL);
}

// Pearson chi-square of `draws` against `probs`.
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs, int64_t draws) {
  double chi2 = 0;
  for (size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] == 0) {
      if (counts[i] != 0) return std::numeric_limits<double>::infinity();
      continue;
    }
    const double e = probs[i] * static_cast<double>(draws);
    chi2 += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi2;
}

std::vector<double> softmax(const std::vector<float>& x, double t) {
  std::vector<double> p(x.size());
  double m = *std::max_element(x.begin(), x.end()), s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += p[i] = std::exp((x[i] - m) / t);
  for (double& v : p) v /= s;
  return p;
}

TEST(Sampler, EmpiricalDistributionMatchesTemperatureSoftmax) {
  const std::vector<float> x = {1.0f, 0.5f, 0.0f, -0.5f, 1.5f, -1.0f, 0.2f, 0.8f};
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.7;
  SamplerRng rng(99);
  constexpr int64_t kDraws = 40000;
  std::vector<int64_t> counts(x.size(), 0);
  for (int64_t i = 0; i < kDraws; ++i) ++counts[sampler.sample(x, p, {}, {}, rng).token];
  // df = 7: P(chi2 > 40.5) = 1e-6 for a correct sampler (the seed fixes the outcome anyway).
  constexpr double kBound = 40.5;
  EXPECT_LT(chi_square(counts, softmax(x, 0.7), kDraws), kBound);
  // The bound has power: the same draws are far from the distribution without temperature.
  EXPECT_GT(chi_square(counts, softmax(x, 1.0), kDraws), 10 * kBound);
}

TEST(Sampler, EmpiricalDistributionMatchesFilteredDistribution) {
  // top_k 5 then top_p 0.8 on a fixed row: draws must follow sampling_distribution, masked
  // tokens never appear, and that distribution is the renormalised softmax of the survivors.
  const std::vector<float> x = {2.0f, 1.8f, 1.5f, 1.0f, 0.9f, 0.85f, 0.3f, -1.0f, 1.2f, 0.0f};
  Sampler sampler;
  SamplingParams p;
  p.temperature = 1.3;
  p.top_k = 5;
  p.top_p = 0.8;
  const std::vector<double> dist = sampler.sampling_distribution(x, p, {}, {});
  // By hand: top_k keeps {0, 1, 2, 8, 3}; their softmax(x / 1.3) is about .282 .242 .192 .153 .131,
  // so top_p 0.8 keeps {0, 1, 2, 8} (mass before token 3: .869 >= .8). The premises are asserted.
  std::vector<float> survivors_logits = {x[0], x[1], x[2], x[8], x[3]};
  std::vector<double> q = softmax(survivors_logits, 1.3);
  ASSERT_LT(q[0] + q[1] + q[2], 0.8);         // token 8 is needed ...
  ASSERT_GE(q[0] + q[1] + q[2] + q[3], 0.8);  // ... and token 3 is not
  std::vector<float> kept_logits = {x[0], x[1], x[2], x[8]};
  std::vector<double> r = softmax(kept_logits, 1.3);
  const std::vector<int32_t> kept_ids = {0, 1, 2, 8};
  std::vector<double> expect(x.size(), 0.0);
  for (size_t i = 0; i < kept_ids.size(); ++i) expect[kept_ids[i]] = r[i];
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(dist[i], expect[i], 1e-6) << i;

  SamplerRng rng(5);
  constexpr int64_t kDraws = 20000;
  std::vector<int64_t> counts(x.size(), 0);
  for (int64_t i = 0; i < kDraws; ++i) ++counts[sampler.sample(x, p, {}, {}, rng).token];
  EXPECT_LT(chi_square(counts, expect, kDraws), 33.4);  // df = 3 (< df 4's 1e-6 bound 33.4)
}

TEST(Sampler, TinyTemperatureIsRaisedNotOverflowed) {
  // 1e-4 is not greedy (>= 1e-5) but is raised to 1e-2 (vLLM): the odds of token 1 over token 0 are
  // e^(0.01 / 0.01) = e, not e^100.
  const std::vector<float> x = {0.0f, 0.01f, -1e30f};
  Sampler sampler;
  SamplingParams p;
  p.temperature = 1e-4;
  auto dist = sampler.sampling_distribution(x, p, {}, {});
  EXPECT_NEAR(dist[1] / dist[0], std::exp(1.0), 1e-4);  // (0.01 - 0) / 0.01
  EXPECT_EQ(dist[2], 0.0);
}

TEST(SamplerDeathTest, OutOfVocabIdsAndNanLogitsAreBugs) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Sampler sampler;
  SamplerRng rng(1);
  SamplingParams p;
  p.logit_bias = {{5, 1.0f}};
  const std::vector<float> x = {0.0f, 1.0f};
  EXPECT_DEATH(sampler.sample(x, p, {}, {}, rng), "logit_bias id 5");
  const std::vector<float> nan = {0.0f, std::nanf("")};
  EXPECT_DEATH(sampler.sample(nan, SamplingParams{}, {}, {}, rng), "NaN");
}

// ---- golden: transformers' logits processors in vLLM's order ------------------------------

TEST(Sampler, MatchesTransformersLogitsProcessors) {
  std::ifstream f(LOOM_SAMPLER_GOLDEN);
  ASSERT_TRUE(f.good()) << LOOM_SAMPLER_GOLDEN;
  const nlohmann::json golden = nlohmann::json::parse(f);
  ASSERT_GE(golden["cases"].size(), 7u);
  for (const auto& c : golden["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    auto params = parse_sampling_params(c["request"], {});
    ASSERT_TRUE(params.ok()) << params.status().to_string();
    params->logprobs = 5;
    const auto logits = c["logits"].get<std::vector<float>>();
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto output = c["output_ids"].get<std::vector<int32_t>>();
    Sampler sampler(c["eos_token_ids"].get<std::vector<int32_t>>());

    // Pre-sampling logits (greedy's input): f32 ops in the same order -> equal up to rounding.
    std::vector<float> pre = logits;
    sampler.apply_pre_sampling(pre, *params, prompt, output);
    const auto& want_pre = c["pre_sampling_logits"];
    for (size_t i = 0; i < pre.size(); ++i) {
      if (want_pre[i].is_null()) {
        EXPECT_EQ(pre[i], -kInf) << i;
      } else {
        EXPECT_NEAR(pre[i], want_pre[i].get<float>(), 1e-5f * std::max(1.0f, std::fabs(pre[i]))) << i;
      }
    }

    // Final distribution: same support exactly, probabilities within 1e-6 (torch softmax in f32).
    const auto want_probs = c["probs"].get<std::vector<double>>();
    const auto dist = sampler.sampling_distribution(logits, *params, prompt, output);
    for (size_t i = 0; i < dist.size(); ++i) {
      EXPECT_EQ(dist[i] > 0, want_probs[i] > 0) << i;
      EXPECT_NEAR(dist[i], want_probs[i], 1e-6) << i;
    }

    // Raw logprobs (torch log_softmax f32 / topk).
    SamplerRng rng(3);
    SampleResult r = sampler.sample(logits, *params, prompt, output, rng);
    EXPECT_GT(want_probs[r.token], 0.0);
    const auto& want_top = c["raw_top5_logprobs"];
    ASSERT_EQ(r.top.size(), want_top.size());
    for (size_t i = 0; i < r.top.size(); ++i) {
      EXPECT_EQ(r.top[i].token, want_top[i][0].get<int32_t>());
      EXPECT_NEAR(r.top[i].logprob, want_top[i][1].get<float>(), 2e-6);
    }
  }
}

}  // namespace
}  // namespace loom::engine
