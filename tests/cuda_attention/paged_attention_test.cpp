// CUDA paged attention against the CPU reference (ops::make_reference_ops) on the same
// bf16/f16-rounded inputs, over a grid: head_dim 64/80/128 (tensor-core kernels) and 8/16/32/
// 72/96/256 (the CUDA-core fallback, generic_kernel.cu); GQA ratios 1/4/7 (and 9/16, which
// split a group across decode CTAs); block sizes 1/16; q lens 1, 7, 97, 1000+ with histories
// 0, 5, 1000+; batches of 1..5 sequences mixing decode and prefill; causal, sliding window,
// non-causal; shuffled non-contiguous block tables; a 32k-token decode and a 64 x 1k decode;
// bf16 and f16; encoder-style batches (non-causal, block size 1, many short sequences) and CUDA
// graph replay on the fallback too. Fresh random inputs each run (seed printed on failure, LOOM_TEST_SEED
// replays); output and workspace poisoned with NaN before every call; tolerance in attention_test_util.h.
// Without a GPU every test that needs one skips with the runtime's reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <tuple>
#include <vector>

#include "attention_test_util.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using ops::testing::uniform_int;
using testing::compare;
using testing::DeviceProblem;
using testing::make_problem;
using testing::Problem;
using testing::reference_output;
using testing::run_gpu;
using testing::SeqSpec;
using testing::within_tolerance;

// Worst errors seen by check() in this process, printed at exit (for the tolerance comment).
struct WorstErrors : ::testing::Environment {
  static inline double rel_l2 = 0, max_abs_ratio = 0;
  static inline int cases = 0;
  void TearDown() override {
    if (cases > 0)
      std::printf("[cuda attention] %d GPU cases: worst rel_l2 %.3g, worst max_abs / max|ref| %.3g\n", cases,
                  rel_l2, max_abs_ratio);
  }
};
[[maybe_unused]] const auto* const kWorstEnv = ::testing::AddGlobalTestEnvironment(new WorstErrors);

// Runs `p` on the GPU with the given kv bound (0: the true maximum) and compares with the
// reference (computed once per problem by the caller).
void check(const Problem& p, const core::Tensor& ref, int32_t bound = 0) {
  DeviceProblem d;
  ASSERT_TRUE(testing::upload(p, d));
  std::vector<float> got;
  ASSERT_TRUE(run_gpu(p, d, bound > 0 ? bound : p.max_kv_len, nullptr, &got)) << p.describe();
  const testing::Metrics m = compare(got, ref);
  EXPECT_TRUE(within_tolerance(m, p)) << "bound " << bound;
  ++WorstErrors::cases;
  WorstErrors::rel_l2 = std::max(WorstErrors::rel_l2, m.rel_l2);
  if (m.max_ref > 0) WorstErrors::max_abs_ratio = std::max(WorstErrors::max_abs_ratio, m.max_abs / m.max_ref);
}

// History lengths named by the brief: 0, 5 and 1000+ (plus short random ones).
int32_t history(std::mt19937_64& rng, int kind) {
  switch (kind) {
    case 0: return 0;
    case 1: return 5;
    case 2: return static_cast<int32_t>(1000 + uniform_int(rng, 0, 100));
    default: return static_cast<int32_t>(uniform_int(rng, 1, 300));
  }
}

// Batch patterns: (q_len, history kind); q_len -1 = 1000+.
const std::vector<std::vector<std::pair<int, int>>>& patterns() {
  static const std::vector<std::vector<std::pair<int, int>>> kPatterns = {
      {{1, 0}, {1, 1}, {1, 2}, {1, 3}, {1, 3}},   // decode batch
      {{7, 0}, {97, 1}, {7, 2}},                  // prefill + chunked prefill
      {{1, 2}, {97, 0}, {7, 1}, {1, 1}, {1, 0}},  // mixed decode / prefill
      {{-1, 0}},                                  // long prefill, no history
      {{-1, 2}, {1, 3}},                          // long chunk after long history + a decode
      {{97, 2}},                                  // chunked prefill after long history
  };
  return kPatterns;
}

// One grid slice per head_dim (separate ctest entries).
void run_grid(int32_t head_dim) {
  LOOM_SEEDED_RNG(rng);
  const int32_t windows[] = {1, 37, 513};
  const float q_amps[] = {1.0f, 4.0f, 12.0f};
  int idx = 0;
  for (int32_t ratio : {1, 4, 7})
    for (int32_t block_size : {1, 16})
      for (size_t pi = 0; pi < patterns().size(); ++pi) {
        ++idx;
        std::vector<SeqSpec> seqs;
        bool long_q = false;
        for (const auto& [q, h] : patterns()[pi]) {
          const int32_t q_len = q > 0 ? q : static_cast<int32_t>(1000 + uniform_int(rng, 0, 60));
          long_q |= q < 0;
          seqs.push_back({q_len, q_len + history(rng, h)});
        }
        // Modes rotate: causal, causal + window, non-causal, non-causal + window.
        const int mode = (idx + static_cast<int>(pi)) % 4;
        const bool causal = mode < 2;
        const int32_t window = mode % 2 ? windows[uniform_int(rng, 0, 2)] : 0;
        // The reference is O(q * kv * heads * D) in double: long problems use one kv head.
        const int32_t kv_heads = long_q ? 1 : 2;
        const DType dtype = idx % 2 ? DType::kBF16 : DType::kF16;
        const float q_amp = q_amps[uniform_int(rng, 0, 2)];
        const Problem p = make_problem(rng, seqs, kv_heads * ratio, kv_heads, head_dim, block_size, dtype,
                                       causal, window, q_amp);
        SCOPED_TRACE(p.describe());
        const core::Tensor ref = reference_output(p);
        check(p, ref);
      }
}

TEST(CudaPagedAttention, GridHeadDim64) {
  LOOM_REQUIRE_GPU();
  run_grid(64);
}
TEST(CudaPagedAttention, GridHeadDim80) {
  LOOM_REQUIRE_GPU();
  run_grid(80);
}
TEST(CudaPagedAttention, GridHeadDim128) {
  LOOM_REQUIRE_GPU();
  run_grid(128);
}

// Head dims without a tensor-core kernel: the CUDA-core fallback (generic_kernel.cu), same grid
// (decode, prefill, chunked prefill, mixed batches; causal / window / non-causal; GQA 1/4/7;
// block sizes 1/16). 72 is Qwen3-VL's vision head_dim; 8/16/32 tiny test models.
TEST(CudaPagedAttention, GenericGridHeadDim8) {
  LOOM_REQUIRE_GPU();
  run_grid(8);
}
TEST(CudaPagedAttention, GenericGridHeadDim16) {
  LOOM_REQUIRE_GPU();
  run_grid(16);
}
TEST(CudaPagedAttention, GenericGridHeadDim32) {
  LOOM_REQUIRE_GPU();
  run_grid(32);
}
TEST(CudaPagedAttention, GenericGridHeadDim72) {
  LOOM_REQUIRE_GPU();
  run_grid(72);
}
TEST(CudaPagedAttention, GenericGridHeadDim96) {
  LOOM_REQUIRE_GPU();
  run_grid(96);
}
TEST(CudaPagedAttention, GenericGridHeadDim256) {
  LOOM_REQUIRE_GPU();
  run_grid(256);
}

const int32_t kGenericDims[] = {8, 16, 32, 72, 96, 256};

// Vision-encoder style batches on the fallback: non-causal, block size 1 (one cache block per
// patch), many short sequences with q_len == kv_len (one per image / window), 16 heads without
// GQA; plus a GQA variant and a windowed one. Never split: workspace 0.
TEST(CudaPagedAttention, GenericEncoderStyle) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  int idx = 0;
  for (int32_t head_dim : kGenericDims) {
    for (int variant = 0; variant < 3; ++variant) {
      ++idx;
      std::vector<SeqSpec> seqs;
      const int n = static_cast<int>(uniform_int(rng, 20, 40));
      for (int i = 0; i < n; ++i) {
        // Mostly short windows, a few longer images (several row tiles, several key tiles).
        const int32_t len =
            static_cast<int32_t>(i % 9 == 4 ? uniform_int(rng, 100, 300) : uniform_int(rng, 1, 70));
        seqs.push_back({len, len});
      }
      const int32_t q_heads = variant == 1 ? 12 : 16;
      const int32_t kv_heads = variant == 1 ? 3 : 16;
      const int32_t window = variant == 2 ? static_cast<int32_t>(uniform_int(rng, 1, 50)) : 0;
      const Problem p = make_problem(rng, seqs, q_heads, kv_heads, head_dim, 1,
                                     idx % 2 ? DType::kBF16 : DType::kF16, false, window, 4.0f);
      SCOPED_TRACE(p.describe());
      DeviceProblem d;
      ASSERT_TRUE(testing::upload(p, d));
      EXPECT_EQ(paged_attention_workspace_bytes(testing::make_desc(p, d, p.max_kv_len)), 0u);
      check(p, reference_output(p));
    }
  }
}

// Decode on the fallback: long contexts (many key tiles, one CTA walks them all), GQA groups
// up to 24 (groups above 16 take the 64-row CTAs even for decode), windows, both dtypes, and a
// kv bound far above the lengths (no split, no workspace, same result).
TEST(CudaPagedAttention, GenericDecode) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  int idx = 0;
  for (int32_t head_dim : kGenericDims)
    for (int32_t ratio : {1, 7, 24}) {
      ++idx;
      std::vector<SeqSpec> seqs;
      for (int i = 0; i < 5; ++i) seqs.push_back({1, static_cast<int32_t>(uniform_int(rng, 1, 3000))});
      seqs.push_back({1, static_cast<int32_t>(uniform_int(rng, 4000, 5000))});
      const int32_t window = idx % 3 == 0 ? static_cast<int32_t>(uniform_int(rng, 1, 700)) : 0;
      const Problem p = make_problem(rng, seqs, 2 * ratio, 2, head_dim, idx % 2 ? 16 : 1,
                                     idx % 4 == 0 ? DType::kF16 : DType::kBF16, true, window, 4.0f);
      SCOPED_TRACE(p.describe());
      const core::Tensor ref = reference_output(p);
      for (int32_t bound : {p.max_kv_len, 131072}) {
        DeviceProblem d;
        ASSERT_TRUE(testing::upload(p, d));
        EXPECT_EQ(paged_attention_workspace_bytes(testing::make_desc(p, d, bound)), 0u);
        check(p, ref, bound);
      }
    }
}

// Short multi-token steps and mixed batches on the fallback whose rows span several tokens
// inside one CTA (per-row causal / window limits), with both CTA heights: max_q_len * group
// <= 16 (16-row CTAs) and above (64-row CTAs); a sequence longer than one 64-row tile.
TEST(CudaPagedAttention, GenericSmallQLenAndMixed) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  struct Variant {
    int32_t ratio;
    std::vector<int32_t> q_lens;
  };
  const std::vector<Variant> variants = {
      {1, {16, 3, 1, 9}}, {4, {4, 2, 1, 3}}, {7, {2, 1, 2}}, {3, {1, 40, 1, 7, 0, 1}}, {1, {150, 1, 65, 64}}};
  int idx = 0;
  for (const auto& v : variants)
    for (int32_t head_dim : kGenericDims) {
      ++idx;
      std::vector<SeqSpec> seqs;
      for (int32_t q : v.q_lens) seqs.push_back({q, q + static_cast<int32_t>(uniform_int(rng, 0, 700))});
      const bool causal = idx % 3 != 2;
      const int32_t window = idx % 2 ? 0 : static_cast<int32_t>(uniform_int(rng, 1, 90));
      const Problem p = make_problem(rng, seqs, 2 * v.ratio, 2, head_dim, idx % 2 ? 16 : 1,
                                     idx % 4 == 0 ? DType::kF16 : DType::kBF16, causal, window, 4.0f);
      SCOPED_TRACE(p.describe());
      check(p, reference_output(p));
    }
}

// Large GQA groups: 9 and 16 fill one 16-row decode chunk, 24 needs two (16 + 8); decode
// batches and a mixed batch (prefill kernel).
TEST(CudaPagedAttention, LargeGroups) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  for (int32_t ratio : {9, 16, 24})
    for (int32_t head_dim : {64, 128}) {
      std::vector<SeqSpec> decode, mixed;
      for (int i = 0; i < 4; ++i) decode.push_back({1, static_cast<int32_t>(uniform_int(rng, 1, 1500))});
      mixed = {{1, 700}, {33, 40}, {5, 5}};
      for (const auto& seqs : {decode, mixed}) {
        const Problem p = make_problem(rng, seqs, 2 * ratio, 2, head_dim, 16, DType::kBF16, true, 0, 4.0f);
        SCOPED_TRACE(p.describe());
        check(p, reference_output(p));
      }
    }
}

// Short multi-token steps (speculative decoding, tiny chunks) with max_q_len * group <= 16 go
// to the decode kernel, whose rows then span several tokens: causal and window masks differ
// per row inside one CTA.
TEST(CudaPagedAttention, SmallQLenDecodeKernel) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  struct Variant {
    int32_t ratio;
    std::vector<int32_t> q_lens;
  };
  const std::vector<Variant> variants = {{1, {16, 3, 1, 9}}, {4, {4, 2, 1, 3}}, {7, {2, 1, 2}}, {16, {1, 1}}};
  int idx = 0;
  for (const auto& v : variants)
    for (int32_t head_dim : {64, 80, 128}) {
      ++idx;
      std::vector<SeqSpec> seqs;
      for (int32_t q : v.q_lens) seqs.push_back({q, q + static_cast<int32_t>(uniform_int(rng, 0, 1200))});
      const bool causal = idx % 3 != 2;
      const int32_t window = idx % 2 ? 0 : static_cast<int32_t>(uniform_int(rng, 1, 40));
      const Problem p = make_problem(rng, seqs, 2 * v.ratio, 2, head_dim, idx % 2 ? 16 : 1,
                                     idx % 4 == 0 ? DType::kF16 : DType::kBF16, causal, window, 4.0f);
      SCOPED_TRACE(p.describe());
      check(p, reference_output(p));
    }
}

// The long single-sequence decode that split-K exists for (Qwen2.5-7B attention shape: 28 q
// heads, 4 kv heads, D 128), with and without a sliding window, and batch 64 x ~1k.
TEST(CudaPagedAttention, DecodeLongContext) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  const int32_t kv = static_cast<int32_t>(32768 - uniform_int(rng, 0, 200));
  for (int32_t window : {0, 4096}) {
    const Problem p = make_problem(rng, {{1, kv}}, 28, 4, 128, 16, DType::kBF16, true, window, 4.0f);
    SCOPED_TRACE(p.describe());
    check(p, reference_output(p));
  }
}

TEST(CudaPagedAttention, DecodeBatch64) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  std::vector<SeqSpec> seqs;
  for (int i = 0; i < 64; ++i) seqs.push_back({1, static_cast<int32_t>(uniform_int(rng, 900, 1100))});
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const Problem p = make_problem(rng, seqs, 28, 4, 128, 16, dtype, true, 0, 4.0f);
    SCOPED_TRACE(p.describe());
    check(p, reference_output(p));
  }
}

// Graph-capture mode: a kv bound far above the true lengths changes only the number of splits
// (most of them past the end), never the result.
TEST(CudaPagedAttention, LargeKvBoundGivesSameResult) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  for (int32_t head_dim : {64, 80, 128}) {
    const std::vector<std::vector<SeqSpec>> batches = {
        {{1, 1}, {1, 300}, {1, 1029}},  // decode
        {{1, 17}, {40, 40}, {3, 900}},  // prefill kernel, split because few CTAs
    };
    for (const auto& seqs : batches) {
      const Problem p = make_problem(rng, seqs, 8, 2, head_dim, 16, DType::kBF16, true, 0, 4.0f);
      SCOPED_TRACE(p.describe());
      const core::Tensor ref = reference_output(p);
      for (int32_t bound : {p.max_kv_len, 4 * p.max_kv_len, 32768, 131072}) {
        DeviceProblem d;
        ASSERT_TRUE(testing::upload(p, d));
        EXPECT_GT(paged_attention_workspace_bytes(testing::make_desc(p, d, bound)), 0u) << "expected a split";
        check(p, ref, bound);
      }
    }
  }
}

// Captures one decode step in a CUDA graph with max_kv_len_bound = 8192, then rewrites
// kv_lens / block_table / q / caches in place (longer contexts, other blocks) and replays:
// the replay must match the reference for the new contents.
void graph_replay(int32_t head_dim) {
  LOOM_SEEDED_RNG(rng);
  constexpr int32_t kSeqs = 6, kBound = 8192;
  std::vector<SeqSpec> first, second;
  for (int i = 0; i < kSeqs; ++i) {
    first.push_back({1, static_cast<int32_t>(uniform_int(rng, 1, 200))});
    second.push_back({1, static_cast<int32_t>(uniform_int(rng, 1000, kBound))});
  }
  // Same shapes for both steps: the second problem decides the cache size and table width.
  Problem p2 = make_problem(rng, second, 28, 4, head_dim, 16, DType::kBF16, true, 0, 4.0f);
  int32_t first_blocks = 0;
  for (const auto& s : first) first_blocks += (s.kv_len + 15) / 16;
  Problem p1 = make_problem(rng, first, 28, 4, head_dim, 16, DType::kBF16, true, 0, 4.0f,
                            p2.num_blocks - first_blocks);
  ASSERT_EQ(p1.num_tokens(), p2.num_tokens());
  // Give p1 p2's table width and cache size so the device buffers can be reused.
  {
    std::vector<int32_t> table(p2.block_table.size(), -1);
    for (int s = 0; s < kSeqs; ++s)
      for (int b = 0; b < p1.max_blocks; ++b)
        table[s * p2.max_blocks + b] = p1.block_table[s * p1.max_blocks + b];
    p1.block_table = table;
    p1.max_blocks = p2.max_blocks;
  }
  ASSERT_EQ(p1.k_cache.numel(), p2.k_cache.numel());

  DeviceProblem d;
  ASSERT_TRUE(testing::upload(p1, d));
  cudaStream_t stream;
  LOOM_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  PagedAttentionDesc desc = testing::make_desc(p1, d, kBound);
  const size_t ws = paged_attention_workspace_bytes(desc);
  ASSERT_TRUE(d.workspace.allocate(ws));
  if (ws > 0) LOOM_CUDA_OK(cudaMemset(d.workspace.get(), 0xff, ws));
  // One eager call first (it sets the kernels' shared-memory limits outside the capture).
  ASSERT_TRUE(paged_attention(desc, d.q.get(), d.k_cache.get(), d.v_cache.get(), d.out.get(),
                              d.workspace.get(), stream)
                  .ok());
  LOOM_CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraph_t graph;
  LOOM_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const core::Status st = paged_attention(desc, d.q.get(), d.k_cache.get(), d.v_cache.get(), d.out.get(),
                                          d.workspace.get(), stream);
  LOOM_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(st.ok()) << st.to_string();
  cudaGraphExec_t exec;
  LOOM_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  for (const Problem* p : {&p1, &p2}) {
    SCOPED_TRACE(p->describe());
    LOOM_CUDA_OK(cudaMemcpy(d.q.get(), p->q.data(), p->q.nbytes(), cudaMemcpyHostToDevice));
    LOOM_CUDA_OK(cudaMemcpy(d.k_cache.get(), p->k_cache.data(), p->k_cache.nbytes(), cudaMemcpyHostToDevice));
    LOOM_CUDA_OK(cudaMemcpy(d.v_cache.get(), p->v_cache.data(), p->v_cache.nbytes(), cudaMemcpyHostToDevice));
    LOOM_CUDA_OK(
        cudaMemcpy(d.kv_lens.get(), p->kv_lens.data(), p->kv_lens.size() * 4, cudaMemcpyHostToDevice));
    LOOM_CUDA_OK(cudaMemcpy(d.block_table.get(), p->block_table.data(), p->block_table.size() * 4,
                            cudaMemcpyHostToDevice));
    LOOM_CUDA_OK(cudaMemset(d.out.get(), 0xff, p->q.nbytes()));
    LOOM_CUDA_OK(cudaGraphLaunch(exec, stream));
    LOOM_CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<uint16_t> bits(static_cast<size_t>(p->q.numel()));
    LOOM_CUDA_OK(cudaMemcpy(bits.data(), d.out.get(), bits.size() * 2, cudaMemcpyDeviceToHost));
    std::vector<float> got(bits.size());
    for (size_t i = 0; i < bits.size(); ++i) got[i] = core::bf16_to_f32(bits[i]);
    EXPECT_TRUE(within_tolerance(compare(got, reference_output(*p)), *p));
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(CudaPagedAttention, GraphReplayWithNewLengths) {
  LOOM_REQUIRE_GPU();
  graph_replay(128);
}
TEST(CudaPagedAttention, GenericGraphReplayWithNewLengths) {
  LOOM_REQUIRE_GPU();
  graph_replay(72);
}

// Batches large enough that neither kernel splits the context (workspace 0): the kernels
// write out directly instead of going through the combine step.
TEST(CudaPagedAttention, UnsplitPaths) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  const int32_t windows[] = {0, 0, 50, 0};
  const bool causal[] = {true, true, true, false};
  for (int variant = 0; variant < 4; ++variant) {
    const int32_t head_dim = variant % 2 ? 128 : 64;
    // Prefill: 16 sequences x 16 kv heads, G = 1 -> >= 16 * 16 CTAs.
    std::vector<SeqSpec> prefill;
    const int32_t q_lens[] = {200, 150, 1, 64, 65, 7, 130, 129};
    for (int i = 0; i < 16; ++i) {
      const int32_t q = q_lens[i % 8];
      prefill.push_back({q, q + static_cast<int32_t>(uniform_int(rng, 0, 400))});
    }
    // Decode: 200 sequences x 4 kv heads -> 800 CTAs without splitting.
    std::vector<SeqSpec> decode;
    for (int i = 0; i < 200; ++i) decode.push_back({1, static_cast<int32_t>(uniform_int(rng, 1, 600))});
    for (const auto& [seqs, q_heads, kv_heads] : {std::tuple{prefill, 16, 16}, std::tuple{decode, 28, 4}}) {
      const Problem p = make_problem(rng, seqs, q_heads, kv_heads, head_dim, 16, DType::kBF16,
                                     causal[variant], windows[variant], 4.0f);
      SCOPED_TRACE(p.describe());
      DeviceProblem d;
      ASSERT_TRUE(testing::upload(p, d));
      EXPECT_EQ(paged_attention_workspace_bytes(testing::make_desc(p, d, p.max_kv_len)), 0u);
      check(p, reference_output(p));
    }
  }
}

// Sequences with no new tokens (q_len 0) in the middle of a batch are skipped, in both kernels.
TEST(CudaPagedAttention, EmptySequences) {
  LOOM_REQUIRE_GPU();
  LOOM_SEEDED_RNG(rng);
  for (const std::vector<SeqSpec>& seqs : {std::vector<SeqSpec>{{1, 50}, {0, 70}, {1, 3}},
                                           std::vector<SeqSpec>{{0, 10}, {20, 130}, {0, 0}, {1, 9}}}) {
    const Problem p = make_problem(rng, seqs, 8, 2, 128, 16, DType::kBF16, true, 0, 4.0f);
    SCOPED_TRACE(p.describe());
    check(p, reference_output(p));
  }
}

// Descriptor errors are Statuses, checked before anything touches the device (no GPU needed).
TEST(CudaPagedAttention, InvalidDescriptorsReturnStatus) {
  PagedAttentionDesc d;
  d.num_seqs = 1;
  d.num_tokens = 1;
  d.q_heads = 8;
  d.kv_heads = 2;
  d.head_dim = 128;
  d.block_size = 16;
  d.max_blocks_per_seq = 4;
  d.max_q_len = 1;
  d.max_kv_len_bound = 64;
  d.scale = 0.1f;
  alignas(16) static int32_t dummy[16];
  d.q_indptr = d.kv_lens = d.block_table = dummy;
  alignas(16) static uint16_t buf[4096];

  auto status_of = [&](PagedAttentionDesc x) {
    return paged_attention(x, buf, buf, buf, buf, nullptr, nullptr);
  };
  PagedAttentionDesc x = d;
  for (int32_t bad : {0, 4, 100, 140, 264, 512}) {  // not a multiple of 8 in [8, 256]
    x.head_dim = bad;
    EXPECT_EQ(status_of(x).code(), core::StatusCode::kUnsupported) << "head_dim " << bad;
    EXPECT_EQ(paged_attention_workspace_bytes(x), 0u);
  }
  x = d;
  x.head_dim = 72;  // the fallback never needs a workspace, whatever the kv bound
  x.max_kv_len_bound = 1 << 20;
  EXPECT_EQ(paged_attention_workspace_bytes(x), 0u);
  x = d;
  x.dtype = DType::kF32;
  EXPECT_EQ(status_of(x).code(), core::StatusCode::kUnsupported);
  x = d;
  x.kv_heads = 3;
  EXPECT_EQ(status_of(x).code(), core::StatusCode::kInvalidArgument);
  x = d;
  x.block_size = 0;
  EXPECT_EQ(status_of(x).code(), core::StatusCode::kInvalidArgument);
  x = d;
  x.max_q_len = 0;
  EXPECT_EQ(status_of(x).code(), core::StatusCode::kInvalidArgument);
  x = d;
  x.max_kv_len_bound = 0;
  EXPECT_EQ(status_of(x).code(), core::StatusCode::kInvalidArgument);
  x = d;
  x.kv_lens = nullptr;
  EXPECT_EQ(status_of(x).code(), core::StatusCode::kInvalidArgument);
  x = d;
  EXPECT_EQ(paged_attention(x, buf + 1, buf, buf, buf, nullptr, nullptr).code(),
            core::StatusCode::kInvalidArgument)
      << "misaligned q";
  EXPECT_EQ(paged_attention_workspace_bytes(x), paged_attention_workspace_bytes(x)) << "deterministic";
  x.num_tokens = 0;
  x.num_seqs = 0;
  EXPECT_TRUE(status_of(x).ok()) << "an empty batch is a no-op";
}

}  // namespace
}  // namespace loom::backends::cuda
