// GPU sampler against the CPU Sampler (engine/sampler.h) on the same logits, parameters and
// uniform draw.
//
// What must match, and how closely:
//   - greedy tokens (with or without bias / min_tokens masks / penalties) and top-logprob ids:
//     exactly (the processing arithmetic is the same IEEE f32 on both sides, ties go to the lower
//     id on both);
//   - raw logprobs (sampled token and top list): within 1e-4 absolute (both compute
//     (x - max) - log(sum exp) with double sums; the GPU's expf/log differ in the last bits);
//   - sampled tokens: exactly, for draws whose decisions are not within float noise of a boundary.
//     The test checks the margins on the CPU side (min_p cut 2e-6 in logit space, against ~5e-7 for
//     one ulp of logf; top_p cut and inverse-CDF step 1e-6 of the mass, against ~2.4e-7 relative for
//     two ulps of expf in every weight) and redraws the uniform or the parameters when a case is
//     too close to call, so every compared case is decided the same way by any correct sampler.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "backends/cuda/sampling.h"
#include "cuda_test_util.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using engine::Sampler;
using engine::SamplerRng;
using engine::SamplingParams;
using testing::DeviceBuffer;

constexpr float kInf = std::numeric_limits<float>::infinity();

struct Row {
  SamplingParams params;
  std::vector<int32_t> prompt, output;
  uint64_t seed = 0;
  double uniform = 0.0;  // the draw the CPU's SamplerRng(seed) makes first
};

SamplingRowParams to_row_params(const SamplingParams& p) {
  SamplingRowParams r;
  r.temperature = static_cast<float>(p.temperature);
  r.top_p = static_cast<float>(p.top_p);
  r.top_k = p.top_k;
  r.min_p = static_cast<float>(p.min_p);
  r.repetition_penalty = static_cast<float>(p.repetition_penalty);
  r.presence_penalty = static_cast<float>(p.presence_penalty);
  r.frequency_penalty = static_cast<float>(p.frequency_penalty);
  r.greedy = p.is_greedy() ? 1 : 0;
  r.num_logprobs = p.logprobs;
  return r;
}

struct Batch {
  int32_t rows = 0, vocab = 0;
  DType dtype = DType::kF32;
  std::vector<float> logits;          // [rows, vocab], exactly the values the GPU sees
  std::vector<uint16_t> logits_bits;  // bf16 storage when dtype is bf16
  std::vector<Row> row;
};

struct GpuResult {
  std::vector<int32_t> tokens, top_ids;
  std::vector<float> logprobs, top_logprobs;
};

const std::vector<int32_t> kEos = {7, 11};

// Runs the GPU sampler on the batch (histories and adjustments built from each row's settings
// exactly as the engine would: logit_bias pairs, and -inf for eos + stop ids under min_tokens).
GpuResult run_gpu(const Batch& b, cudaStream_t stream) {
  GpuResult r;
  std::vector<SamplingRowParams> params;
  std::vector<double> uniforms;
  std::vector<int32_t> hist_ids, hist_off = {0}, out_begin, adj_ids, adj_off = {0};
  std::vector<float> adj_vals;
  for (const Row& row : b.row) {
    params.push_back(to_row_params(row.params));
    uniforms.push_back(row.uniform);
    hist_ids.insert(hist_ids.end(), row.prompt.begin(), row.prompt.end());
    out_begin.push_back(static_cast<int32_t>(hist_ids.size()));
    hist_ids.insert(hist_ids.end(), row.output.begin(), row.output.end());
    hist_off.push_back(static_cast<int32_t>(hist_ids.size()));
    for (const auto& [id, v] : row.params.logit_bias) adj_ids.push_back(id), adj_vals.push_back(v);
    if (static_cast<int64_t>(row.output.size()) < row.params.min_tokens) {
      for (int32_t id : kEos) adj_ids.push_back(id), adj_vals.push_back(-kInf);
      for (int32_t id : row.params.stop_token_ids) adj_ids.push_back(id), adj_vals.push_back(-kInf);
    }
    adj_off.push_back(static_cast<int32_t>(adj_ids.size()));
  }
  const size_t n = static_cast<size_t>(b.rows) * b.vocab;
  DeviceBuffer dl(n * (b.dtype == DType::kF32 ? 4 : 2)), dp(params.size() * sizeof(SamplingRowParams)),
      du(uniforms.size() * 8), dh(hist_ids.size() * 4), dho(hist_off.size() * 4), dob(out_begin.size() * 4),
      da(adj_ids.size() * 4), dav(adj_vals.size() * 4), dao(adj_off.size() * 4);
  if (b.dtype == DType::kF32) {
    dl.upload(b.logits);
  } else {
    dl.upload(b.logits_bits);
  }
  dp.upload(params);
  du.upload(uniforms);
  dh.upload(hist_ids);
  dho.upload(hist_off);
  dob.upload(out_begin);
  da.upload(adj_ids);
  dav.upload(adj_vals);
  dao.upload(adj_off);
  DeviceBuffer tokens(b.rows * 4), logprobs(b.rows * 4), top_ids(b.rows * kMaxTopLogprobs * 4),
      top_lp(b.rows * kMaxTopLogprobs * 4);
  tokens.poison();
  logprobs.poison();
  top_ids.poison();
  top_lp.poison();
  const size_t ws_bytes = sampling_workspace_bytes(b.rows, b.vocab, static_cast<int64_t>(hist_ids.size()));
  DeviceBuffer ws(ws_bytes);
  ws.poison();

  SamplingBatch sb;
  sb.logits = dl.get();
  sb.logits_dtype = b.dtype;
  sb.rows = b.rows;
  sb.vocab = b.vocab;
  sb.params = dp.as<SamplingRowParams>();
  sb.uniforms = du.as<double>();
  sb.history = TokenHistory{dh.as<int32_t>(), dho.as<int32_t>(), dob.as<int32_t>(),
                            static_cast<int64_t>(hist_ids.size())};
  sb.adjustments = LogitAdjustments{da.as<int32_t>(), dav.as<float>(), dao.as<int32_t>(),
                                    static_cast<int64_t>(adj_ids.size())};
  SamplingOutputs out{tokens.as<int32_t>(), logprobs.as<float>(), top_ids.as<int32_t>(), top_lp.as<float>()};
  const core::Status st = sample(sb, out, ws.get(), ws_bytes, stream);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  r.tokens = tokens.download<int32_t>(b.rows);
  r.logprobs = logprobs.download<float>(b.rows);
  r.top_ids = top_ids.download<int32_t>(static_cast<size_t>(b.rows) * kMaxTopLogprobs);
  r.top_logprobs = top_lp.download<float>(static_cast<size_t>(b.rows) * kMaxTopLogprobs);
  return r;
}

// Logprobs agree within 1e-4; a masked (-inf) logit must be -inf on both sides.
::testing::AssertionResult logprob_near(float got, float want) {
  if (std::isinf(want) || std::isinf(got)) {
    if (got == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "got " << got << " want " << want;
  }
  if (std::abs(got - want) <= 1e-4f) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << " want " << want << " (|diff| > 1e-4)";
}

void expect_matches_cpu(const Batch& b, const GpuResult& g) {
  const Sampler sampler(kEos);
  for (int32_t i = 0; i < b.rows; ++i) {
    const Row& row = b.row[i];
    SCOPED_TRACE("row " + std::to_string(i) + " greedy " + std::to_string(row.params.is_greedy()) + " T " +
                 std::to_string(row.params.temperature) + " top_k " + std::to_string(row.params.top_k) +
                 " top_p " + std::to_string(row.params.top_p) + " min_p " + std::to_string(row.params.min_p) +
                 " logprobs " + std::to_string(row.params.logprobs));
    const std::span<const float> logits(b.logits.data() + static_cast<size_t>(i) * b.vocab, b.vocab);
    SamplerRng rng(row.seed);
    const engine::SampleResult want = sampler.sample(logits, row.params, row.prompt, row.output, rng);
    EXPECT_EQ(g.tokens[i], want.token);
    if (row.params.logprobs < 0) continue;
    EXPECT_TRUE(logprob_near(g.logprobs[i], want.logprob));
    const size_t k = want.top.size();
    ASSERT_LE(k, static_cast<size_t>(kMaxTopLogprobs));
    for (size_t j = 0; j < static_cast<size_t>(kMaxTopLogprobs); ++j) {
      const int32_t id = g.top_ids[i * kMaxTopLogprobs + j];
      const float lp = g.top_logprobs[i * kMaxTopLogprobs + j];
      if (j < k) {
        EXPECT_EQ(id, want.top[j].token) << "top entry " << j;
        EXPECT_TRUE(logprob_near(lp, want.top[j].logprob)) << "top entry " << j;
      } else {
        EXPECT_EQ(id, -1) << "padding entry " << j;
        EXPECT_EQ(lp, -kInf) << "padding entry " << j;
      }
    }
  }
}

// True when every sampling decision for this row is far from a boundary (see the file comment).
bool margins_ok(const Sampler& sampler, std::span<const float> logits, const Row& row) {
  const SamplingParams& p = row.params;
  if (p.is_greedy()) return true;
  std::vector<float> x(logits.begin(), logits.end());
  sampler.apply_pre_sampling(x, p, row.prompt, row.output);
  const double t = std::max(p.temperature, engine::kMinSamplingTemperature);
  if (t != 1.0) engine::logits_ops::apply_temperature(x, static_cast<float>(t));
  const float m = *std::max_element(x.begin(), x.end());
  if (p.min_p > 0.0) {
    const float lm = std::log(static_cast<float>(p.min_p));
    for (float v : x)
      if (v != -kInf && std::abs((v - m) - lm) < 2e-6f) return false;
    engine::logits_ops::apply_min_p(x, static_cast<float>(p.min_p));
  }
  engine::logits_ops::apply_top_k(x, p.top_k);
  std::vector<int32_t> ids;
  double total = 0.0;
  for (size_t i = 0; i < x.size(); ++i)
    if (x[i] != -kInf)
      ids.push_back(static_cast<int32_t>(i)), total += std::exp(static_cast<double>(x[i] - m));
  if (p.top_p < 1.0 && ids.size() > 1) {
    std::sort(ids.begin(), ids.end(),
              [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    const double target = p.top_p * total;
    double before = 0.0;
    for (int32_t id : ids) {
      const double incl = before + std::exp(static_cast<double>(x[id] - m));
      if (incl >= target) {
        if (std::abs(incl - target) < 1e-6 * total || std::abs(before - target) < 1e-6 * total) return false;
        break;
      }
      before = incl;
    }
  }
  const std::vector<double> probs = sampler.sampling_distribution(logits, p, row.prompt, row.output);
  double cdf = 0.0;
  for (double q : probs) {
    if (q == 0.0) continue;
    const double next = cdf + q;
    if (std::abs(next - row.uniform) < 1e-6) return false;
    cdf = next;
  }
  return true;
}

std::vector<float> random_logits(std::mt19937_64& rng, int32_t vocab, float sigma) {
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> v(static_cast<size_t>(vocab));
  for (float& x : v) x = nd(rng);
  return v;
}

// Fills b.logits (and bits) from per-row f32 values, rounding to bf16 when asked.
void set_logits(Batch& b, const std::vector<float>& all) {
  b.logits = all;
  if (b.dtype == DType::kBF16) {
    b.logits_bits.resize(all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      b.logits_bits[i] = core::f32_to_bf16(all[i]);
      b.logits[i] = core::bf16_to_f32(b.logits_bits[i]);
    }
  }
}

class CudaSamplingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LOOM_REQUIRE_CUDA();
    LOOM_ASSERT_CUDA(cudaStreamCreate(&stream_));
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CudaSamplingTest, GreedyAndRawLogprobsMatchCpu) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const int32_t kLogprobs[] = {-1, 0, 1, 5, 20};
  for (int32_t vocab : {13, 1000, 152064})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " " + std::string(core::dtype_name(dt)));
      Batch b;
      b.rows = 37;
      b.vocab = vocab;
      b.dtype = dt;
      std::vector<float> all;
      for (int32_t i = 0; i < b.rows; ++i) {
        std::vector<float> v = random_logits(rng, vocab, 3.0f);
        if (i % 3 == 0) {  // a tie at the maximum: the lower id must win
          const auto mx = std::max_element(v.begin(), v.end()) - v.begin();
          v[testing::uniform_int(rng, 0, vocab - 1)] = v[mx];
        }
        if (i % 5 == 1) v[testing::uniform_int(rng, 0, vocab - 1)] = -kInf;  // a masked logit
        if (i % 7 == 4) std::fill(v.begin(), v.end(), 1.5f);                 // all tied: lowest ids first
        all.insert(all.end(), v.begin(), v.end());
        Row row;
        row.params.temperature = 0.0;
        row.params.logprobs = kLogprobs[testing::uniform_int(rng, 0, 4)];
        b.row.push_back(row);
      }
      set_logits(b, all);
      expect_matches_cpu(b, run_gpu(b, stream_));
    }
}

// Random histories concentrated on the likeliest tokens so that penalties change the argmax.
void add_history(Row& row, const std::vector<float>& logits, std::mt19937_64& rng) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + 30, order.end(),
                    [&](int32_t a, int32_t c) { return logits[a] > logits[c]; });
  const int64_t np = testing::uniform_int(rng, 0, 300), no = testing::uniform_int(rng, 0, 60);
  for (int64_t j = 0; j < np; ++j)
    row.prompt.push_back(j % 2 ? order[testing::uniform_int(rng, 0, 29)]
                               : static_cast<int32_t>(testing::uniform_int(rng, 0, logits.size() - 1)));
  for (int64_t j = 0; j < no; ++j) row.output.push_back(order[testing::uniform_int(rng, 0, 29)]);
}

void add_processing(Row& row, const std::vector<float>& logits, std::mt19937_64& rng) {
  const int kind = static_cast<int>(testing::uniform_int(rng, 0, 5));
  if (kind >= 1) add_history(row, logits, rng);
  if (kind == 1 || kind == 4) row.params.repetition_penalty = testing::uniform(rng, 0.5f, 2.0f);
  if (kind == 2 || kind == 4) row.params.frequency_penalty = testing::uniform(rng, -2.0f, 2.0f);
  if (kind == 3 || kind == 4) row.params.presence_penalty = testing::uniform(rng, -2.0f, 2.0f);
  if (kind == 5) {
    row.params.min_tokens = 100;  // output is shorter: eos + stop ids are masked
    row.params.stop_token_ids = {static_cast<int32_t>(testing::uniform_int(rng, 0, logits.size() - 1))};
  }
  if (testing::uniform_int(rng, 0, 2) == 0) {
    const auto mx = std::max_element(logits.begin(), logits.end()) - logits.begin();
    row.params.logit_bias = {{static_cast<int32_t>(mx), -5.0f},
                             {static_cast<int32_t>(testing::uniform_int(rng, 0, logits.size() - 1)), 4.0f}};
  }
}

TEST_F(CudaSamplingTest, GreedyWithPenaltiesBiasAndMasksMatchesCpu) {
  LOOM_CUDA_SEEDED_RNG(rng);
  for (int32_t vocab : {1000, 152064})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " " + std::string(core::dtype_name(dt)));
      Batch b;
      b.rows = 41;
      b.vocab = vocab;
      b.dtype = dt;
      std::vector<float> all;
      for (int32_t i = 0; i < b.rows; ++i) {
        std::vector<float> v = random_logits(rng, vocab, 2.0f);
        Row row;
        row.params.temperature = i % 4 == 0 ? 0.7 : 0.0;
        row.params.top_k = i % 4 == 0 ? 1 : 0;  // greedy through top_k == 1 too
        row.params.logprobs = i % 2 ? 3 : -1;
        add_processing(row, v, rng);
        all.insert(all.end(), v.begin(), v.end());
        b.row.push_back(row);
      }
      set_logits(b, all);
      expect_matches_cpu(b, run_gpu(b, stream_));
    }
}

// Non-greedy rows (temperature, min_p, top_k, top_p, penalties), mixed with greedy ones in the same
// batch, each with its seeded uniform; only cases far from every boundary are compared.
TEST_F(CudaSamplingTest, SampledTokensMatchCpuAwayFromBoundaries) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const Sampler sampler(kEos);
  const double kTemps[] = {0.3, 0.8, 1.0, 1.7};
  const int32_t kTopK[] = {0, -1, 1, 5, 50, 2000};
  const double kTopP[] = {1.0, 0.95, 0.6, 0.1};
  const double kMinP[] = {0.0, 0.0, 0.02, 0.3};
  for (int32_t vocab : {1000, 152064})
    for (DType dt : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + " " + std::string(core::dtype_name(dt)));
      Batch b;
      b.rows = vocab > 10000 ? 24 : 64;
      b.vocab = vocab;
      b.dtype = dt;
      std::vector<float> all;
      for (int32_t i = 0; i < b.rows; ++i) {
        // Rows with a few dominant tokens and rows that are flat, so top_p cuts at varied depths.
        std::vector<float> v = random_logits(rng, vocab, i % 2 ? 1.0f : 4.0f);
        if (dt == DType::kBF16)
          for (float& x : v) x = core::bf16_to_f32(core::f32_to_bf16(x));
        Row row;
        bool ok = false;
        for (int attempt = 0; attempt < 200 && !ok; ++attempt) {
          row = Row{};
          row.params.temperature = i % 8 == 7 ? 0.0 : kTemps[testing::uniform_int(rng, 0, 3)];
          row.params.top_k = kTopK[testing::uniform_int(rng, 0, 5)];
          row.params.top_p = kTopP[testing::uniform_int(rng, 0, 3)];
          row.params.min_p = kMinP[testing::uniform_int(rng, 0, 3)];
          row.params.logprobs = static_cast<int32_t>(testing::uniform_int(rng, -1, 4));
          if (i % 3 == 0) add_processing(row, v, rng);
          row.seed = rng();
          SamplerRng draw(row.seed);
          row.uniform = row.params.is_greedy() ? 0.0 : draw.next_double();
          ok = margins_ok(sampler, v, row);
        }
        ASSERT_TRUE(ok) << "could not find a case away from the boundaries for row " << i;
        all.insert(all.end(), v.begin(), v.end());
        b.row.push_back(row);
      }
      set_logits(b, all);
      const GpuResult g = run_gpu(b, stream_);
      expect_matches_cpu(b, g);
      // Same inputs, same outputs: the GPU sampler is deterministic.
      const GpuResult again = run_gpu(b, stream_);
      EXPECT_EQ(again.tokens, g.tokens);
      EXPECT_EQ(again.top_ids, g.top_ids);
    }
}

// Many draws of one row: the empirical distribution follows the CPU's sampling distribution
// (a check on the draw itself that does not rely on matching a single uniform).
TEST_F(CudaSamplingTest, EmpiricalDistributionFollowsCpu) {
  LOOM_CUDA_SEEDED_RNG(rng);
  const Sampler sampler(kEos);
  const int32_t vocab = 50, rows = 4000;
  std::vector<float> v = random_logits(rng, vocab, 1.5f);
  SamplingParams p;
  p.temperature = 0.9;
  p.top_k = 30;
  p.top_p = 0.9;
  const std::vector<double> probs = sampler.sampling_distribution(v, p, {}, {});
  Batch b;
  b.rows = rows;
  b.vocab = vocab;
  std::vector<float> all;
  for (int32_t i = 0; i < rows; ++i) {
    all.insert(all.end(), v.begin(), v.end());
    Row row;
    row.params = p;
    row.uniform = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    b.row.push_back(row);
  }
  set_logits(b, all);
  const GpuResult g = run_gpu(b, stream_);
  std::vector<double> count(vocab, 0.0);
  for (int32_t t : g.tokens) {
    ASSERT_TRUE(t >= 0 && t < vocab) << t;
    count[t] += 1.0;
  }
  for (int32_t t = 0; t < vocab; ++t) {
    if (probs[t] == 0.0) {
      EXPECT_EQ(count[t], 0.0) << "token " << t << " is filtered out but was drawn";
    } else {
      const double sd = std::sqrt(rows * probs[t] * (1 - probs[t]));
      EXPECT_NEAR(count[t], rows * probs[t], 5 * sd + 1) << "token " << t;
    }
  }
}

TEST_F(CudaSamplingTest, FullyMaskedRowGivesMinusOneAndBadWorkspaceIsRejected) {
  const int32_t vocab = 5;
  std::vector<float> logits = {1, 2, 3, 4, 5};
  SamplingRowParams p;
  p.greedy = 1;
  p.num_logprobs = 2;
  std::vector<int32_t> adj_ids = {0, 1, 2, 3, 4}, adj_off = {0, 5};
  std::vector<float> adj_vals(5, -kInf);
  std::vector<double> u = {0.5};
  DeviceBuffer dl(20), dp(sizeof p), du(8), da(20), dav(20), dao(8);
  dl.upload(logits);
  dp.upload(std::vector<SamplingRowParams>{p});
  du.upload(u);
  da.upload(adj_ids);
  dav.upload(adj_vals);
  dao.upload(adj_off);
  DeviceBuffer tokens(4), lp(4), ti(kMaxTopLogprobs * 4), tl(kMaxTopLogprobs * 4);
  tokens.poison();
  SamplingBatch sb;
  sb.logits = dl.get();
  sb.rows = 1;
  sb.vocab = vocab;
  sb.params = dp.as<SamplingRowParams>();
  sb.uniforms = du.as<double>();
  sb.adjustments = LogitAdjustments{da.as<int32_t>(), dav.as<float>(), dao.as<int32_t>(), 5};
  SamplingOutputs out{tokens.as<int32_t>(), lp.as<float>(), ti.as<int32_t>(), tl.as<float>()};
  const size_t need = sampling_workspace_bytes(1, vocab, 0);
  DeviceBuffer ws(need);
  EXPECT_EQ(sample(sb, out, ws.get(), need - 1, stream_).code(), core::StatusCode::kInvalidArgument);
  LOOM_ASSERT_OK(sample(sb, out, ws.get(), need, stream_));
  LOOM_ASSERT_CUDA(cudaStreamSynchronize(stream_));
  EXPECT_EQ(tokens.download<int32_t>(1)[0], -1);
  // The raw logprobs do not see the masks.
  const std::vector<int32_t> top = ti.download<int32_t>(2);
  EXPECT_EQ(top, (std::vector<int32_t>{4, 3}));
}

}  // namespace
}  // namespace loom::backends::cuda
