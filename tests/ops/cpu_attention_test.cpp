// Fast paged attention against the reference over a grid: head_dim 64/80/128, block
// sizes 1/16, GQA ratios 1/4/7, sliding window on/off, causal and not, batches of 1..4
// sequences mixing decode (q_len 1), chunked prefill (7) and prefill (97) with contexts up
// to 1100 tokens, KV caches f32/bf16/f16. Block tables use shuffled, non-contiguous block
// ids and every cache slot outside the contexts holds NaN, so a read of a wrong slot
// fails the comparison.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "cpu_test_variants.h"
#include "op_test_util.h"

namespace loom::ops {
namespace {

using core::DType;

using testing::all_close;
using testing::fast_variants;
using testing::poison;
using testing::random_tensor;
using testing::reference;
using testing::uniform;
using testing::uniform_int;

// Tolerance: outputs are convex combinations of V values in [-1, 1]. The fast path
// computes scores in f32 (scale folded into q), exponentials with a ~2 ulp vector exp and
// an online (rescaled) softmax in f32; the reference does all of it in double. Score
// errors ~1e-6 (|q.k| <= ~30 here) move weights by ~1e-6 relative; measured worst
// max-abs error over many runs is ~1e-6. The bound leaves ~10x margin.
constexpr double kAttnAtol = 1e-5, kAttnRtol = 1e-5;

struct SeqSpec {
  int32_t q_len = 0, kv_len = 0;
};

struct AttentionCase {
  int64_t q_heads = 0, kv_heads = 0, head_dim = 0, block_size = 0;
  std::vector<int32_t> q_indptr, kv_lens, block_table;
  int32_t max_blocks = 0;
  Tensor q, k_cache, v_cache;

  PagedAttentionParams params(bool causal, int32_t window) const {
    PagedAttentionParams p;
    p.q_indptr = q_indptr;
    p.kv_lens = kv_lens;
    p.block_table = block_table;
    p.max_blocks_per_seq = max_blocks;
    p.block_size = static_cast<int32_t>(block_size);
    p.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    p.causal = causal;
    p.sliding_window = window;
    return p;
  }
};

AttentionCase make_case(std::mt19937_64& rng, const std::vector<SeqSpec>& seqs, int64_t q_heads,
                        int64_t kv_heads, int64_t head_dim, int64_t block_size, DType cache_type,
                        float q_amp) {
  AttentionCase c;
  c.q_heads = q_heads;
  c.kv_heads = kv_heads;
  c.head_dim = head_dim;
  c.block_size = block_size;
  int64_t total_blocks = 3;  // a few spare blocks nobody owns
  int64_t max_blocks = 0;
  c.q_indptr.push_back(0);
  for (const auto& s : seqs) {
    const int64_t blocks = (s.kv_len + block_size - 1) / block_size;
    total_blocks += blocks;
    max_blocks = std::max(max_blocks, blocks);
    c.q_indptr.push_back(c.q_indptr.back() + s.q_len);
    c.kv_lens.push_back(s.kv_len);
  }
  c.max_blocks = static_cast<int32_t>(max_blocks + 1);
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  c.block_table.assign(seqs.size() * static_cast<size_t>(c.max_blocks), -1);
  size_t next = 0;
  for (size_t s = 0; s < seqs.size(); ++s) {
    const int64_t blocks = (seqs[s].kv_len + block_size - 1) / block_size;
    for (int64_t b = 0; b < blocks; ++b) c.block_table[s * c.max_blocks + b] = ids[next++];
  }
  c.k_cache = Tensor::empty({total_blocks, block_size, kv_heads, head_dim}, cache_type);
  c.v_cache = Tensor::empty({total_blocks, block_size, kv_heads, head_dim}, cache_type);
  poison(c.k_cache);
  poison(c.v_cache);
  const int64_t row = kv_heads * head_dim;
  for (size_t s = 0; s < seqs.size(); ++s)
    for (int64_t t = 0; t < seqs[s].kv_len; ++t) {
      const int64_t slot =
          int64_t{c.block_table[s * c.max_blocks + t / block_size]} * block_size + t % block_size;
      for (int64_t i = 0; i < row; ++i) {
        testing::set_elem(c.k_cache, slot * row + i, uniform(rng, -1.0f, 1.0f));
        testing::set_elem(c.v_cache, slot * row + i, uniform(rng, -1.0f, 1.0f));
      }
    }
  c.q = random_tensor({c.q_indptr.back(), q_heads, head_dim}, DType::kF32, rng, -q_amp, q_amp);
  return c;
}

std::string describe(const AttentionCase& c, bool causal, int32_t window, float q_amp) {
  std::string s = "D=" + std::to_string(c.head_dim) + " bs=" + std::to_string(c.block_size) +
                  " heads=" + std::to_string(c.q_heads) + "/" + std::to_string(c.kv_heads) +
                  " causal=" + std::to_string(causal) + " window=" + std::to_string(window) +
                  " cache=" + std::string(core::dtype_name(c.k_cache.dtype())) +
                  " q_amp=" + std::to_string(q_amp) + " seqs(q,kv)=";
  for (size_t i = 0; i < c.kv_lens.size(); ++i)
    s += "(" + std::to_string(c.q_indptr[i + 1] - c.q_indptr[i]) + "," + std::to_string(c.kv_lens[i]) + ")";
  return s;
}

void check_against_reference(const AttentionCase& c, bool causal, int32_t window, float q_amp) {
  const PagedAttentionParams p = c.params(causal, window);
  Tensor ref = Tensor::empty(c.q.shape(), DType::kF32);
  poison(ref);
  reference().paged_attention(c.q, c.k_cache, c.v_cache, p, ref);
  for (auto& v : fast_variants()) {
    Tensor out = Tensor::empty(c.q.shape(), DType::kF32);
    poison(out);
    v.ops->paged_attention(c.q, c.k_cache, c.v_cache, p, out);
    EXPECT_TRUE(all_close(out, ref, kAttnAtol, kAttnRtol))
        << v.name << " " << describe(c, causal, window, q_amp);
  }
}

// One grid slice per head_dim (three ctest entries that can run in parallel).
void run_grid(int64_t head_dim) {
  LOOM_SEEDED_RNG(rng);
  const DType cache_types[] = {DType::kF32, DType::kBF16, DType::kF16};
  const int32_t q_len_pattern[] = {1, 97, 7, 1};
  const int32_t windows[] = {1, 37, 513};
  const float q_amps[] = {1.0f, 4.0f, 12.0f};
  int idx = 0;
  for (int64_t block_size : {1, 16})
    for (int64_t ratio : {1, 4, 7})
      for (bool window_on : {false, true})
        for (bool causal : {true, false}) {
          ++idx;
          const int nseq = 1 + (idx + static_cast<int>(head_dim)) % 4;
          std::vector<SeqSpec> seqs;
          for (int j = 0; j < nseq; ++j) {
            SeqSpec s;
            s.q_len = q_len_pattern[(j + idx) % 4];
            int64_t history = 0;
            if (s.q_len == 1) history = uniform_int(rng, 0, 1100);
            if (s.q_len == 7) history = uniform_int(rng, 0, 400);
            if (s.q_len == 97) history = idx % 2 ? 0 : uniform_int(rng, 0, 1000);
            if (j == 0 && idx % 3 == 0) history = std::max<int64_t>(history, 1000 + uniform_int(rng, 0, 100));
            s.kv_len = static_cast<int32_t>(s.q_len + history);
            seqs.push_back(s);
          }
          const int32_t window = window_on ? windows[uniform_int(rng, 0, 2)] : 0;
          const float q_amp = q_amps[uniform_int(rng, 0, 2)];
          const int64_t kv_heads = 2;
          const AttentionCase c = make_case(rng, seqs, kv_heads * ratio, kv_heads, head_dim, block_size,
                                            cache_types[idx % 3], q_amp);
          check_against_reference(c, causal, window, q_amp);
        }
}

TEST(CpuOpsAttention, GridHeadDim64) {
  run_grid(64);
}
TEST(CpuOpsAttention, GridHeadDim80) {
  run_grid(80);
}
TEST(CpuOpsAttention, GridHeadDim128) {
  run_grid(128);
}

// Long single-sequence decode (what split-KV exists for) and a batch of many short
// decodes, with uneven splits.
TEST(CpuOpsAttention, DecodeLongContextAndManySequences) {
  LOOM_SEEDED_RNG(rng);
  for (int64_t head_dim : {64, 128})
    for (int64_t ratio : {1, 7}) {
      const int32_t kv = static_cast<int32_t>(uniform_int(rng, 3000, 5000));
      const AttentionCase one = make_case(rng, {{1, kv}}, 2 * ratio, 2, head_dim, 16, DType::kBF16, 4.0f);
      check_against_reference(one, true, 0, 4.0f);
      check_against_reference(one, true, 1500, 4.0f);
      std::vector<SeqSpec> many;
      for (int i = 0; i < 9; ++i) many.push_back({1, static_cast<int32_t>(uniform_int(rng, 1, 300))});
      const AttentionCase batch = make_case(rng, many, 2 * ratio, 2, head_dim, 1, DType::kF32, 4.0f);
      check_against_reference(batch, true, 0, 4.0f);
    }
}

// Head dims that are not multiples of the vector width exercise the scalar tails.
TEST(CpuOpsAttention, OddHeadDims) {
  LOOM_SEEDED_RNG(rng);
  for (int64_t head_dim : {20, 34})
    for (DType cache : {DType::kF32, DType::kF16}) {
      const AttentionCase c = make_case(rng, {{1, 300}, {7, 50}, {40, 40}}, 6, 2, head_dim, 16, cache, 4.0f);
      check_against_reference(c, true, 0, 4.0f);
      check_against_reference(c, false, 33, 4.0f);
    }
}

// Sequences with no new tokens (q_len 0) are legal and produce nothing.
TEST(CpuOpsAttention, EmptySequencesInBatch) {
  LOOM_SEEDED_RNG(rng);
  const AttentionCase c = make_case(rng, {{0, 5}, {3, 40}, {0, 0}, {1, 17}}, 4, 2, 64, 16, DType::kF32, 4.0f);
  check_against_reference(c, true, 0, 4.0f);
}

}  // namespace
}  // namespace loom::ops
