// Timings of the CUDA paged attention against the two floors (ENGINEERING.md §4): bytes that
// must move / measured copy bandwidth for decode, FLOPs / measured-or-quoted tensor rate for
// prefill. Disabled by default (timed assertions do not belong in tests); run with
//   cuda_attention_test --gtest_also_run_disabled_tests --gtest_filter='*Bench*'
// (LOOM_ATTN_BENCH=<substring of a case name> selects cases.)
// Shapes are Qwen2.5-7B's attention (28 q heads, 4 kv heads, head_dim 128, block size 16),
// plus Qwen3-VL's vision attention on the CUDA-core fallback (16 heads, head_dim 72,
// non-causal, block size 1) and head_dim 96 / 256 cases of the fallback.
// Inputs are random (never zeros), and several disjoint copies of the KV cache are rotated so
// repeated runs do not measure the L2 cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "attention_test_util.h"

namespace loom::backends::cuda {
namespace {

using testing::DeviceBuffer;

struct Timer {
  cudaEvent_t a, b;
  Timer() {
    cudaEventCreate(&a);
    cudaEventCreate(&b);
  }
  ~Timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device-to-device copy bandwidth (bytes read + written per second).
double copy_bandwidth() {
  const size_t bytes = size_t{1} << 31;
  DeviceBuffer src(bytes), dst(bytes);
  cudaMemset(src.get(), 1, bytes);
  Timer t;
  std::vector<double> ms;
  for (int i = 0; i < 12; ++i) {
    cudaEventRecord(t.a);
    cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(t.b);
    cudaEventSynchronize(t.b);
    float m = 0;
    cudaEventElapsedTime(&m, t.a, t.b);
    if (i >= 2) ms.push_back(m);
  }
  return 2.0 * bytes / (median(ms) * 1e-3);
}

struct BenchCase {
  const char* name;
  std::vector<testing::SeqSpec> seqs;
  int32_t q_heads = 28, kv_heads = 4, head_dim = 128, block = 16;
  bool causal = true;
};

// Fills `n` 16-bit elements with random bf16 values in [-1, 1) (cheap generator, host side).
void random_bf16(std::vector<uint16_t>& v, uint64_t seed) {
  uint64_t x = seed | 1;
  for (auto& e : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const float f = static_cast<float>(static_cast<int64_t>(x >> 40) - (int64_t{1} << 23)) / float(1 << 23);
    e = core::f32_to_bf16(f);
  }
}

void run_case(const BenchCase& c, double copy_bw, double tensor_rate) {
  const int32_t kQHeads = c.q_heads, kKvHeads = c.kv_heads, kDim = c.head_dim, kBlock = c.block;
  const int nseq = static_cast<int>(c.seqs.size());
  int32_t max_q = 0, max_kv = 0, tokens = 0, blocks_per_copy = 0, max_blocks = 0;
  double kv_bytes = 0, flops = 0;
  for (const auto& s : c.seqs) {
    max_q = std::max(max_q, s.q_len);
    max_kv = std::max(max_kv, s.kv_len);
    tokens += s.q_len;
    const int32_t b = (s.kv_len + kBlock - 1) / kBlock;
    blocks_per_copy += b;
    max_blocks = std::max(max_blocks, b);
    kv_bytes += 2.0 * s.kv_len * kKvHeads * kDim * 2;
    for (int32_t i = 0; i < s.q_len; ++i)
      flops += 4.0 * kDim * kQHeads * (c.causal ? s.kv_len - s.q_len + i + 1 : s.kv_len);
  }
  // Enough copies that one rotation covers >= 512 MB (well past the 60 MB L2).
  const int copies = static_cast<int>(std::clamp(512e6 / kv_bytes, 1.0, 8.0));
  const size_t elems_per_block = static_cast<size_t>(kBlock) * kKvHeads * kDim;
  const size_t cache_elems = elems_per_block * blocks_per_copy * copies;
  DeviceBuffer kc(cache_elems * 2), vc(cache_elems * 2), q(size_t{2} * tokens * kQHeads * kDim),
      out(size_t{2} * tokens * kQHeads * kDim);
  {
    std::vector<uint16_t> h(cache_elems);
    random_bf16(h, 1);
    cudaMemcpy(kc.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice);
    random_bf16(h, 2);
    cudaMemcpy(vc.get(), h.data(), h.size() * 2, cudaMemcpyHostToDevice);
    std::vector<uint16_t> hq(static_cast<size_t>(tokens) * kQHeads * kDim);
    random_bf16(hq, 3);
    cudaMemcpy(q.get(), hq.data(), hq.size() * 2, cudaMemcpyHostToDevice);
  }
  std::vector<int32_t> indptr{0}, lens;
  for (const auto& s : c.seqs) {
    indptr.push_back(indptr.back() + s.q_len);
    lens.push_back(s.kv_len);
  }
  DeviceBuffer d_indptr(indptr.size() * 4), d_lens(lens.size() * 4);
  cudaMemcpy(d_indptr.get(), indptr.data(), indptr.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(d_lens.get(), lens.data(), lens.size() * 4, cudaMemcpyHostToDevice);
  // Copy r's tables use blocks [r * blocks_per_copy, (r + 1) * blocks_per_copy), shuffled.
  std::mt19937_64 rng(7);
  std::vector<DeviceBuffer> tables(copies);
  for (int r = 0; r < copies; ++r) {
    std::vector<int32_t> ids(blocks_per_copy);
    std::iota(ids.begin(), ids.end(), r * blocks_per_copy);
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<int32_t> table(static_cast<size_t>(nseq) * max_blocks, -1);
    size_t next = 0;
    for (int s = 0; s < nseq; ++s)
      for (int32_t b = 0; b < (c.seqs[s].kv_len + kBlock - 1) / kBlock; ++b)
        table[s * max_blocks + b] = ids[next++];
    tables[r].allocate(table.size() * 4);
    cudaMemcpy(tables[r].get(), table.data(), table.size() * 4, cudaMemcpyHostToDevice);
  }
  PagedAttentionDesc desc;
  desc.num_seqs = nseq;
  desc.num_tokens = tokens;
  desc.q_heads = kQHeads;
  desc.kv_heads = kKvHeads;
  desc.head_dim = kDim;
  desc.block_size = kBlock;
  desc.max_blocks_per_seq = max_blocks;
  desc.max_q_len = max_q;
  desc.max_kv_len_bound = max_kv;
  desc.scale = 1.0f / std::sqrt(static_cast<float>(kDim));
  desc.causal = c.causal;
  desc.q_indptr = d_indptr.as<int32_t>();
  desc.kv_lens = d_lens.as<int32_t>();
  DeviceBuffer ws(paged_attention_workspace_bytes(desc));

  Timer t;
  std::vector<double> ms;
  for (int i = 0; i < 40; ++i) {
    desc.block_table = tables[i % copies].as<int32_t>();
    cudaEventRecord(t.a);
    const core::Status st = paged_attention(desc, q.get(), kc.get(), vc.get(), out.get(), ws.get(), nullptr);
    cudaEventRecord(t.b);
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(cudaEventSynchronize(t.b), cudaSuccess) << cudaGetErrorString(cudaGetLastError());
    float m = 0;
    cudaEventElapsedTime(&m, t.a, t.b);
    if (i >= 5) ms.push_back(m);
  }
  const double sec = median(ms) * 1e-3;
  const double bytes = kv_bytes + 2.0 * 2 * tokens * kQHeads * kDim;
  const double mem_floor = bytes / copy_bw, flop_floor = flops / tensor_rate;
  std::printf(
      "%-28s %9.1f us  %7.0f GB/s (%4.0f%% of copy)  %6.1f TFLOP/s  floor %7.1f us  (%s-bound) -> %3.0f%%\n",
      c.name, sec * 1e6, bytes / sec / 1e9, 100.0 * bytes / sec / copy_bw, flops / sec / 1e12,
      std::max(mem_floor, flop_floor) * 1e6, mem_floor > flop_floor ? "memory" : "compute",
      100.0 * std::max(mem_floor, flop_floor) / sec);
}

TEST(CudaPagedAttention, DISABLED_Bench) {
  LOOM_REQUIRE_GPU();
  const double bw = copy_bandwidth();
  // bf16 dense tensor rate measured on an H200 here (KINDS.md: 769-798 TFLOP/s, cuBLAS 8k^3).
  const double rate = 780e12;
  std::printf("device copy bandwidth %.0f GB/s (read + write); tensor rate used for floors %.0f TFLOP/s\n",
              bw / 1e9, rate / 1e12);
  auto uniform = [](int n, int32_t q, int32_t kv) { return std::vector<testing::SeqSpec>(n, {q, kv}); };
  std::vector<testing::SeqSpec> mixed = uniform(63, 1, 1024);
  mixed.push_back({512, 512});
  const std::vector<BenchCase> cases = {
      {"decode b1 x 32k", uniform(1, 1, 32768)},
      {"decode b8 x 4k", uniform(8, 1, 4096)},
      {"decode b64 x 1k", uniform(64, 1, 1024)},
      {"decode b256 x 1k", uniform(256, 1, 1024)},
      {"decode b64 x 4k", uniform(64, 1, 4096)},
      {"prefill 1 x 4k causal", uniform(1, 4096, 4096)},
      {"prefill 4 x 1k causal", uniform(4, 1024, 1024)},
      {"prefill 1 x 16k causal", uniform(1, 16384, 16384)},
      {"chunk 512 after 8k", uniform(1, 512, 8704)},
      {"chunk 2k after 30k", uniform(1, 2048, 32768)},
      {"mixed 512 + 63 x 1k decode", mixed},
      // CUDA-core fallback (the tensor rate floor overstates what it can reach).
      {"generic vision D72 4 x 1k", uniform(4, 1024, 1024), 16, 16, 72, 1, false},
      {"generic vision D72 1 x 4k", uniform(1, 4096, 4096), 16, 16, 72, 1, false},
      {"generic prefill D96 4 x 1k causal", uniform(4, 1024, 1024), 32, 8, 96, 16, true},
      {"generic decode D256 b64 x 1k", uniform(64, 1, 1024), 16, 8, 256, 16, true},
  };
  // LOOM_ATTN_BENCH=<substring> runs only the matching cases (e.g. under a profiler).
  const char* only = std::getenv("LOOM_ATTN_BENCH");
  for (const auto& c : cases)
    if (!only || std::strstr(c.name, only)) run_case(c, bw, rate);
}

}  // namespace
}  // namespace loom::backends::cuda
