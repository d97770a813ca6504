#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "core/check.h"

namespace loom::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

uint64_t splitmix64(uint64_t& x) {
  x += 0x9e3779b97f4a7c15ULL;
  uint64_t z = x;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

constexpr uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

float max_logit(std::span<const float> logits) {
  // Four independent chains: a single running max is latency-bound.
  float m[4] = {kNegInf, kNegInf, kNegInf, kNegInf};
  size_t i = 0;
  for (; i + 4 <= logits.size(); i += 4) {
    for (int k = 0; k < 4; ++k) m[k] = std::max(m[k], logits[i + k]);
  }
  for (; i < logits.size(); ++i) m[0] = std::max(m[0], logits[i]);
  return std::max(std::max(m[0], m[1]), std::max(m[2], m[3]));
}

// Max and log(sum(exp(x - max))) of a row; {-inf, 0} when every logit is -inf.
struct LogNormalizer {
  float max = kNegInf;
  float log_sum = 0.0f;
  float logprob(float x) const { return (x - max) - log_sum; }
};

LogNormalizer log_normalizer(std::span<const float> logits) {
  LogNormalizer n;
  n.max = max_logit(logits);
  if (n.max == kNegInf) return n;
  double sum = 0.0;
  for (float x : logits) sum += std::exp(x - n.max);
  n.log_sum = static_cast<float>(std::log(sum));
  return n;
}

// The tokens still in play after temperature / min_p / top_k, ascending ids, with their
// unnormalised probabilities w = exp(x - max). The draw walks them in this (id) order.
struct Candidates {
  std::vector<int32_t> ids;
  std::vector<float> w;
  double total = 0.0;  // sum of w, accumulated in double
};

Candidates gather_candidates(std::span<const float> logits) {
  Candidates c;
  const float m = max_logit(logits);
  if (m == kNegInf) return c;
  size_t finite = 0;
  for (float x : logits) finite += x != kNegInf;
  c.ids.resize(finite);
  c.w.resize(finite);
  size_t k = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] == kNegInf) continue;
    c.ids[k] = static_cast<int32_t>(i);
    c.w[k] = std::exp(logits[i] - m);
    c.total += c.w[k];
    ++k;
  }
  return c;
}

// Top-p on candidates (see logits_ops::apply_top_p for the rule); keeps ids ascending.
void top_p_filter(std::span<const float> logits, Candidates& c, float p) {
  const size_t n = c.ids.size();
  if (p >= 1.0f || n <= 1) return;
  const double target = static_cast<double>(p) * c.total;
  // "Better" = higher logit, ties by lower id; candidate index j is in id order, so ties by lower j.
  auto better = [&](uint32_t a, uint32_t b) {
    const float xa = logits[c.ids[a]], xb = logits[c.ids[b]];
    return xa > xb || (xa == xb && a < b);
  };
  // Walks `sorted` (in `better` order, preceded by mass `before`): token j stays iff the mass
  // before it is < target. Marks the kept ones.
  std::vector<uint8_t> keep(n, 0);
  auto walk = [&](std::span<const uint32_t> sorted, double before) {
    for (size_t j = 0; j < sorted.size() && before < target; ++j) {
      keep[sorted[j]] = 1;
      before += c.w[sorted[j]];
    }
  };
  float hi = kNegInf, lo = -kNegInf;
  for (int32_t id : c.ids) {
    hi = std::max(hi, logits[id]);
    lo = std::min(lo, logits[id]);
  }
  constexpr size_t kSortAll = 512;
  if (n <= kSortAll || hi == lo || !std::isfinite(hi - lo)) {
    std::vector<uint32_t> order(n);
    for (uint32_t j = 0; j < n; ++j) order[j] = j;
    if (hi != lo) std::sort(order.begin(), order.end(), better);  // all tied: index order already is
    walk(order, 0.0);
  } else {
    // Histogram by logit: bucket b holds a slice of logits below the max, higher buckets first,
    // and the map is monotone; so buckets before the one where the mass crosses the target stay
    // whole, buckets after it go, and only that bucket is sorted. O(n) instead of sorting the
    // nucleus, which for top_p 0.95 can be most of the vocabulary.
    constexpr int kBuckets = 4096;
    const float scale = static_cast<float>(kBuckets - 1) / (hi - lo);
    std::vector<uint16_t> bucket(n);
    std::vector<double> mass(kBuckets, 0.0);
    for (size_t j = 0; j < n; ++j) {
      bucket[j] =
          static_cast<uint16_t>(std::min(kBuckets - 1, static_cast<int>((hi - logits[c.ids[j]]) * scale)));
      mass[bucket[j]] += c.w[j];
    }
    int crossing = kBuckets;  // first bucket whose end reaches the target; none: keep all
    double before = 0.0;
    for (int b = 0; b < kBuckets; ++b) {
      if (before + mass[b] >= target) {
        crossing = b;
        break;
      }
      before += mass[b];
    }
    std::vector<uint32_t> edge;
    for (uint32_t j = 0; j < n; ++j) {
      if (bucket[j] < crossing) keep[j] = 1;
      if (bucket[j] == crossing) edge.push_back(j);
    }
    std::sort(edge.begin(), edge.end(), better);
    walk(edge, before);
  }
  size_t out = 0;
  double total = 0.0;
  for (size_t j = 0; j < n; ++j) {
    if (!keep[j]) continue;
    c.ids[out] = c.ids[j];
    c.w[out] = c.w[j];
    total += c.w[j];
    ++out;
  }
  c.ids.resize(out);
  c.w.resize(out);
  c.total = total;
}

void check_ids(std::span<const int32_t> ids, size_t vocab, const char* what) {
  for (int32_t id : ids) {
    LOOM_CHECK(id >= 0 && static_cast<size_t>(id) < vocab)
        << what << " id " << id << " outside vocab " << vocab;
  }
}

}  // namespace

// ---- SamplerRng ---------------------------------------------------------------------------

SamplerRng::SamplerRng(std::optional<uint64_t> seed, uint64_t index) {
  uint64_t x;
  if (seed) {
    x = *seed + index;
  } else {
    std::random_device rd;
    x = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }
  for (uint64_t& s : s_) s = splitmix64(x);  // never all zero: splitmix64 is a bijection of distinct inputs
}

uint64_t SamplerRng::next_u64() {
  // xoshiro256** (Blackman & Vigna).
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double SamplerRng::next_double() {
  return static_cast<double>(next_u64() >> 11) * 0x1.0p-53;
}

// ---- logits_ops ---------------------------------------------------------------------------

namespace logits_ops {

void apply_logit_bias(std::span<float> logits, std::span<const std::pair<int32_t, float>> bias) {
  for (const auto& [id, b] : bias) {
    LOOM_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "logit_bias id " << id;
    logits[id] += b;
  }
}

void mask_tokens(std::span<float> logits, std::span<const int32_t> ids) {
  for (int32_t id : ids) {
    LOOM_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size()) << "masked id " << id;
    logits[id] = kNegInf;
  }
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_ids,
                     std::span<const int32_t> output_ids, float repetition, float frequency, float presence) {
  const size_t vocab = logits.size();
  check_ids(prompt_ids, vocab, "prompt");
  check_ids(output_ids, vocab, "output");
  if (repetition != 1.0f) {
    // Each distinct token of prompt + output once: vLLM/HF penalise presence, not count.
    std::vector<uint8_t> seen(vocab, 0);
    auto penalise = [&](int32_t id) {
      if (seen[id]) return;
      seen[id] = 1;
      float& x = logits[id];
      x = x > 0.0f ? x / repetition : x * repetition;
    };
    for (int32_t id : prompt_ids) penalise(id);
    for (int32_t id : output_ids) penalise(id);
  }
  if (frequency != 0.0f || presence != 0.0f) {
    std::vector<int32_t> sorted(output_ids.begin(), output_ids.end());
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size();) {
      size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) ++j;
      float& x = logits[sorted[i]];
      x -= frequency * static_cast<float>(j - i);
      x -= presence;
      i = j;
    }
  }
}

void apply_temperature(std::span<float> logits, float temperature) {
  LOOM_CHECK(temperature > 0.0f) << temperature;
  for (float& x : logits) x /= temperature;
}

void apply_min_p(std::span<float> logits, float min_p) {
  if (min_p <= 0.0f) return;
  const float m = max_logit(logits);
  if (m == kNegInf) return;
  // p_i < min_p * p_max  <=>  exp(x_i - m) < min_p  <=>  x_i - m < log(min_p).
  const float log_min_p = std::log(min_p);
  for (float& x : logits) {
    if (x - m < log_min_p) x = kNegInf;
  }
}

void apply_top_k(std::span<float> logits, int32_t k) {
  if (k <= 0 || static_cast<size_t>(k) >= logits.size()) return;
  // The k-th largest value through a size-k min-heap: one pass, and for unordered logits the
  // heap is rarely touched after it fills.
  std::vector<float> heap(logits.begin(), logits.begin() + k);
  std::make_heap(heap.begin(), heap.end(), std::greater<float>());
  for (size_t i = k; i < logits.size(); ++i) {
    if (logits[i] > heap.front()) {
      std::pop_heap(heap.begin(), heap.end(), std::greater<float>());
      heap.back() = logits[i];
      std::push_heap(heap.begin(), heap.end(), std::greater<float>());
    }
  }
  const float kth = heap.front();
  for (float& x : logits) {
    if (x < kth) x = kNegInf;
  }
}

void apply_top_p(std::span<float> logits, float p) {
  if (p >= 1.0f) return;
  Candidates c = gather_candidates(logits);
  top_p_filter(logits, c, p);
  std::vector<uint8_t> keep(logits.size(), 0);
  for (int32_t id : c.ids) keep[id] = 1;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!keep[i]) logits[i] = kNegInf;
  }
}

int32_t argmax(std::span<const float> logits) {
  int32_t best = -1;
  float best_x = kNegInf;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_x) {  // strict: the first (lowest id) of equal maxima wins
      best_x = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

float log_sum_exp(std::span<const float> logits) {
  LogNormalizer n = log_normalizer(logits);
  return n.max == kNegInf ? kNegInf : n.max + n.log_sum;
}

std::vector<TokenLogprob> top_k_entries(std::span<const float> logits, int32_t k) {
  k = std::min<int64_t>(k, static_cast<int64_t>(logits.size()));
  std::vector<TokenLogprob> out;
  if (k <= 0) return out;
  out.reserve(k + 1);
  // One pass with a small sorted buffer (k <= 20 in practice); ties keep the earlier (lower) id
  // because a newcomer only displaces strictly smaller values.
  for (size_t i = 0; i < logits.size(); ++i) {
    const float x = logits[i];
    if (static_cast<int32_t>(out.size()) == k && !(x > out.back().logprob)) continue;
    auto pos = std::find_if(out.begin(), out.end(), [x](const TokenLogprob& e) { return e.logprob < x; });
    out.insert(pos, TokenLogprob{static_cast<int32_t>(i), x});
    if (static_cast<int32_t>(out.size()) > k) out.pop_back();
  }
  return out;
}

}  // namespace logits_ops

// ---- Sampler ------------------------------------------------------------------------------

Sampler::Sampler(std::vector<int32_t> eos_token_ids) : eos_token_ids_(std::move(eos_token_ids)) {}

void Sampler::apply_pre_sampling(std::span<float> logits, const SamplingParams& params,
                                 std::span<const int32_t> prompt_ids,
                                 std::span<const int32_t> output_ids) const {
  logits_ops::apply_logit_bias(logits, params.logit_bias);
  if (static_cast<int64_t>(output_ids.size()) < params.min_tokens) {
    logits_ops::mask_tokens(logits, eos_token_ids_);
    logits_ops::mask_tokens(logits, params.stop_token_ids);
  }
  if (params.repetition_penalty != 1.0 || params.frequency_penalty != 0.0 || params.presence_penalty != 0.0) {
    logits_ops::apply_penalties(logits, prompt_ids, output_ids, static_cast<float>(params.repetition_penalty),
                                static_cast<float>(params.frequency_penalty),
                                static_cast<float>(params.presence_penalty));
  }
}

void Sampler::apply_sampling_filters(std::span<float> logits, const SamplingParams& params) const {
  // vLLM raises tiny temperatures to 1e-2: below that f32 logits overflow.
  const double t = std::max(params.temperature, kMinSamplingTemperature);
  if (t != 1.0) logits_ops::apply_temperature(logits, static_cast<float>(t));
  logits_ops::apply_min_p(logits, static_cast<float>(params.min_p));
  logits_ops::apply_top_k(logits, params.top_k);
}

SampleResult Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                             std::span<const int32_t> prompt_ids, std::span<const int32_t> output_ids,
                             SamplerRng& rng) const {
  const size_t vocab = logits.size();
  LOOM_CHECK(vocab > 0) << "empty logits row";
  for (float x : logits) {
    LOOM_CHECK(!std::isnan(x) && x != std::numeric_limits<float>::infinity())
        << "model produced a NaN/+inf logit";
  }
  SampleResult result;
  LogNormalizer raw;
  if (params.logprobs >= 0) {
    // Raw logprobs (vLLM v1 "raw_logprobs"): before bias, penalties, temperature and filters.
    raw = log_normalizer(logits);
    result.top = logits_ops::top_k_entries(logits, params.logprobs);
    for (TokenLogprob& e : result.top) e.logprob = raw.logprob(e.logprob);
  }

  std::vector<float> scratch(logits.begin(), logits.end());  // [vocab]
  apply_pre_sampling(scratch, params, prompt_ids, output_ids);
  if (params.is_greedy()) {
    result.token = logits_ops::argmax(scratch);
    LOOM_CHECK(result.token >= 0) << "every token is masked (logit_bias / min_tokens / penalties)";
  } else {
    apply_sampling_filters(scratch, params);
    Candidates c = gather_candidates(scratch);
    LOOM_CHECK(!c.ids.empty()) << "every token is masked (logit_bias / min_tokens / penalties)";
    top_p_filter(scratch, c, static_cast<float>(params.top_p));
    // Inverse CDF in id order; the last candidate is also the fallback when rounding leaves the
    // running sum at or below the target.
    const double target = rng.next_double() * c.total;
    double acc = 0.0;
    size_t j = 0;
    for (; j + 1 < c.ids.size(); ++j) {
      acc += c.w[j];
      if (acc > target) break;
    }
    result.token = c.ids[j];
  }
  if (params.logprobs >= 0) result.logprob = raw.logprob(logits[result.token]);
  return result;
}

std::vector<double> Sampler::sampling_distribution(std::span<const float> logits,
                                                   const SamplingParams& params,
                                                   std::span<const int32_t> prompt_ids,
                                                   std::span<const int32_t> output_ids) const {
  std::vector<float> scratch(logits.begin(), logits.end());
  apply_pre_sampling(scratch, params, prompt_ids, output_ids);
  std::vector<double> probs(scratch.size(), 0.0);
  if (params.is_greedy()) {
    const int32_t t = logits_ops::argmax(scratch);
    LOOM_CHECK(t >= 0) << "every token is masked";
    probs[t] = 1.0;
    return probs;
  }
  apply_sampling_filters(scratch, params);
  Candidates c = gather_candidates(scratch);
  LOOM_CHECK(!c.ids.empty()) << "every token is masked";
  top_p_filter(scratch, c, static_cast<float>(params.top_p));
  for (size_t j = 0; j < c.ids.size(); ++j) probs[c.ids[j]] = c.w[j] / c.total;
  return probs;
}

}  // namespace loom::engine
