// Helpers for the CUDA paged-attention tests and benchmarks: random paged problems (shuffled,
// non-contiguous block tables; cache slots outside every context hold NaN so a read of a wrong
// slot shows up), the CPU reference on the same bf16/f16-rounded inputs, device buffers, and
// the whole-tensor comparison.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../ops/op_test_util.h"
#include "backends/cuda/attention/paged_attention.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "ops/reference_ops.h"

namespace loom::backends::cuda::testing {

using core::DType;
using core::Tensor;

// Skips the test when the runtime sees no device (this is the normal case on CI machines).
inline bool gpu_available(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    cudaGetLastError();
    return false;
  }
  if (n == 0) {
    *why = "cudaGetDeviceCount returned 0 devices";
    return false;
  }
  return true;
}

#define LOOM_REQUIRE_GPU()                                           \
  do {                                                               \
    std::string loom_why_;                                           \
    if (!::loom::backends::cuda::testing::gpu_available(&loom_why_)) \
      GTEST_SKIP() << "no CUDA device: " << loom_why_;               \
  } while (0)

#define LOOM_CUDA_OK(expr)                                                           \
  do {                                                                               \
    const cudaError_t loom_e_ = (expr);                                              \
    ASSERT_EQ(loom_e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(loom_e_); \
  } while (0)

// Owning device allocation.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { allocate(bytes); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_) cudaFree(ptr_);
  }
  // Returns false (and leaves the buffer empty) on failure.
  bool allocate(size_t bytes) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = nullptr;
    bytes_ = bytes;
    if (bytes == 0) return true;
    return cudaMalloc(&ptr_, bytes) == cudaSuccess;
  }
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

struct SeqSpec {
  int32_t q_len = 0, kv_len = 0;
};

// One paged-attention problem with host copies of every input.
struct Problem {
  int32_t q_heads = 0, kv_heads = 0, head_dim = 0, block_size = 0;
  DType dtype = DType::kBF16;
  bool causal = true;
  int32_t window = 0;
  float q_amp = 1.0f;
  std::vector<SeqSpec> seqs;
  std::vector<int32_t> q_indptr, kv_lens, block_table;
  int32_t max_blocks = 0, num_blocks = 0, max_q_len = 0, max_kv_len = 0;
  Tensor q;                 // [T, q_heads, head_dim] dtype
  Tensor k_cache, v_cache;  // [num_blocks, block_size, kv_heads, head_dim] dtype

  int32_t num_tokens() const { return q_indptr.back(); }
  float scale() const { return 1.0f / std::sqrt(static_cast<float>(head_dim)); }

  std::string describe() const {
    std::ostringstream os;
    os << "D=" << head_dim << " bs=" << block_size << " heads=" << q_heads << "/" << kv_heads
       << " dtype=" << core::dtype_name(dtype) << " causal=" << causal << " window=" << window
       << " q_amp=" << q_amp << " seqs(q,kv)=";
    for (const auto& s : seqs) os << "(" << s.q_len << "," << s.kv_len << ")";
    return os.str();
  }
};

inline uint16_t round_to(DType t, float v) {
  return t == DType::kBF16 ? core::f32_to_bf16(v) : core::f32_to_f16(v);
}
inline float widen(DType t, uint16_t v) {
  return t == DType::kBF16 ? core::bf16_to_f32(v) : core::f16_to_f32(v);
}

// Random problem. Block ids are a shuffled permutation (plus `spare_blocks` nobody owns);
// block-table entries past a sequence's last block are -1; every cache slot outside the
// contexts is NaN.
inline Problem make_problem(std::mt19937_64& rng, std::vector<SeqSpec> seqs, int32_t q_heads,
                            int32_t kv_heads, int32_t head_dim, int32_t block_size, DType dtype, bool causal,
                            int32_t window, float q_amp, int32_t spare_blocks = 3) {
  Problem p;
  p.q_heads = q_heads;
  p.kv_heads = kv_heads;
  p.head_dim = head_dim;
  p.block_size = block_size;
  p.dtype = dtype;
  p.causal = causal;
  p.window = window;
  p.q_amp = q_amp;
  p.seqs = std::move(seqs);
  int64_t total_blocks = spare_blocks, max_blocks = 0;
  p.q_indptr.push_back(0);
  for (const auto& s : p.seqs) {
    const int64_t blocks = (s.kv_len + block_size - 1) / block_size;
    total_blocks += blocks;
    max_blocks = std::max(max_blocks, blocks);
    p.q_indptr.push_back(p.q_indptr.back() + s.q_len);
    p.kv_lens.push_back(s.kv_len);
    p.max_q_len = std::max(p.max_q_len, s.q_len);
    p.max_kv_len = std::max(p.max_kv_len, s.kv_len);
  }
  p.max_blocks = static_cast<int32_t>(max_blocks + 1);
  p.num_blocks = static_cast<int32_t>(total_blocks);
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.block_table.assign(p.seqs.size() * static_cast<size_t>(p.max_blocks), -1);
  size_t next = 0;
  for (size_t s = 0; s < p.seqs.size(); ++s) {
    const int64_t blocks = (p.seqs[s].kv_len + block_size - 1) / block_size;
    for (int64_t b = 0; b < blocks; ++b) p.block_table[s * p.max_blocks + b] = ids[next++];
  }
  const core::Shape cache_shape{total_blocks, block_size, kv_heads, head_dim};
  p.k_cache = Tensor::empty(cache_shape, dtype);
  p.v_cache = Tensor::empty(cache_shape, dtype);
  const uint16_t nan_bits = round_to(dtype, std::numeric_limits<float>::quiet_NaN());
  uint16_t* kp = p.k_cache.data_as<uint16_t>();
  uint16_t* vp = p.v_cache.data_as<uint16_t>();
  std::fill(kp, kp + p.k_cache.numel(), nan_bits);
  std::fill(vp, vp + p.v_cache.numel(), nan_bits);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  const int64_t row = int64_t{kv_heads} * head_dim;
  for (size_t s = 0; s < p.seqs.size(); ++s)
    for (int64_t t = 0; t < p.seqs[s].kv_len; ++t) {
      const int64_t slot =
          int64_t{p.block_table[s * p.max_blocks + t / block_size]} * block_size + t % block_size;
      for (int64_t i = 0; i < row; ++i) {
        kp[slot * row + i] = round_to(dtype, unit(rng));
        vp[slot * row + i] = round_to(dtype, unit(rng));
      }
    }
  p.q = Tensor::empty({p.num_tokens(), q_heads, head_dim}, dtype);
  uint16_t* qp = p.q.data_as<uint16_t>();
  for (int64_t i = 0; i < p.q.numel(); ++i) qp[i] = round_to(dtype, q_amp * unit(rng));
  return p;
}

// The CPU reference (double accumulation) on the rounded inputs widened to f32. Sequences are
// cut into contiguous chunks that run on separate threads (the reference is single-threaded).
inline Tensor reference_output(const Problem& p) {
  const Tensor q32 = p.q.to_f32();
  Tensor out = Tensor::empty(p.q.shape(), DType::kF32);
  float* o = out.data_as<float>();
  std::fill(o, o + out.numel(), std::numeric_limits<float>::quiet_NaN());
  const int nseq = static_cast<int>(p.seqs.size());
  const int nthreads =
      std::max(1, std::min<int>(nseq, static_cast<int>(std::thread::hardware_concurrency())));
  // Balance by the work of each sequence (~ q_len * kv_len).
  std::vector<double> work(nseq);
  double total = 0;
  for (int s = 0; s < nseq; ++s) total += work[s] = double{p.seqs[s].q_len + 1.0} * (p.seqs[s].kv_len + 1.0);
  std::vector<int> cut{0};
  double acc = 0;
  for (int s = 0; s < nseq; ++s) {
    acc += work[s];
    if (acc >= total * static_cast<double>(cut.size()) / nthreads && s + 1 < nseq &&
        static_cast<int>(cut.size()) < nthreads)
      cut.push_back(s + 1);
  }
  cut.push_back(nseq);
  std::vector<std::thread> threads;
  for (size_t c = 0; c + 1 < cut.size(); ++c) {
    threads.emplace_back([&, s0 = cut[c], s1 = cut[c + 1]] {
      const int32_t r0 = p.q_indptr[s0], r1 = p.q_indptr[s1];
      if (r1 == r0) return;
      std::vector<int32_t> indptr, lens, table;
      for (int s = s0; s <= s1; ++s) indptr.push_back(p.q_indptr[s] - r0);
      for (int s = s0; s < s1; ++s) lens.push_back(p.kv_lens[s]);
      table.assign(p.block_table.begin() + int64_t{s0} * p.max_blocks,
                   p.block_table.begin() + int64_t{s1} * p.max_blocks);
      ops::PagedAttentionParams params;
      params.q_indptr = indptr;
      params.kv_lens = lens;
      params.block_table = table;
      params.max_blocks_per_seq = p.max_blocks;
      params.block_size = p.block_size;
      params.scale = p.scale();
      params.causal = p.causal;
      params.sliding_window = p.window;
      Tensor q_part = q32.slice_rows(r0, r1);
      Tensor out_part = out.slice_rows(r0, r1);
      ops::make_reference_ops()->paged_attention(q_part, p.k_cache, p.v_cache, params, out_part);
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

// Device copies of a problem's inputs plus a poisoned output.
struct DeviceProblem {
  DeviceBuffer q, k_cache, v_cache, out, q_indptr, kv_lens, block_table, workspace;
};

inline ::testing::AssertionResult upload(const Problem& p, DeviceProblem& d) {
  auto put = [](DeviceBuffer& b, const void* src, size_t bytes) {
    if (!b.allocate(std::max<size_t>(bytes, 16))) return false;
    return bytes == 0 || cudaMemcpy(b.get(), src, bytes, cudaMemcpyHostToDevice) == cudaSuccess;
  };
  if (!put(d.q, p.q.data(), p.q.nbytes()) || !put(d.k_cache, p.k_cache.data(), p.k_cache.nbytes()) ||
      !put(d.v_cache, p.v_cache.data(), p.v_cache.nbytes()) ||
      !put(d.q_indptr, p.q_indptr.data(), p.q_indptr.size() * 4) ||
      !put(d.kv_lens, p.kv_lens.data(), p.kv_lens.size() * 4) ||
      !put(d.block_table, p.block_table.data(), p.block_table.size() * 4) ||
      !d.out.allocate(std::max<size_t>(p.q.nbytes(), 16)))
    return ::testing::AssertionFailure() << "upload failed: " << cudaGetErrorString(cudaGetLastError());
  return ::testing::AssertionSuccess();
}

inline PagedAttentionDesc make_desc(const Problem& p, const DeviceProblem& d, int32_t max_kv_len_bound) {
  PagedAttentionDesc desc;
  desc.num_seqs = static_cast<int32_t>(p.seqs.size());
  desc.num_tokens = p.num_tokens();
  desc.q_heads = p.q_heads;
  desc.kv_heads = p.kv_heads;
  desc.head_dim = p.head_dim;
  desc.block_size = p.block_size;
  desc.max_blocks_per_seq = p.max_blocks;
  desc.max_q_len = p.max_q_len;
  desc.max_kv_len_bound = max_kv_len_bound;
  desc.scale = p.scale();
  desc.causal = p.causal;
  desc.sliding_window = p.window;
  desc.dtype = p.dtype;
  desc.q_indptr = d.q_indptr.as<int32_t>();
  desc.kv_lens = d.kv_lens.as<int32_t>();
  desc.block_table = d.block_table.as<int32_t>();
  return desc;
}

// Poisons out (NaN) and the workspace (NaN), runs the kernel on `stream`, and returns the
// output widened to f32 in *result.
inline ::testing::AssertionResult run_gpu(const Problem& p, DeviceProblem& d, int32_t max_kv_len_bound,
                                          cudaStream_t stream, std::vector<float>* result) {
  const PagedAttentionDesc desc = make_desc(p, d, max_kv_len_bound);
  const size_t ws = paged_attention_workspace_bytes(desc);
  if (!d.workspace.allocate(ws))
    return ::testing::AssertionFailure() << "workspace alloc of " << ws << " bytes";
  if (ws > 0 && cudaMemset(d.workspace.get(), 0xff, ws) != cudaSuccess)
    return ::testing::AssertionFailure() << "workspace memset";
  if (cudaMemset(d.out.get(), 0xff, p.q.nbytes()) != cudaSuccess)  // 0xffff is NaN in bf16 and f16
    return ::testing::AssertionFailure() << "out memset";
  const core::Status st = paged_attention(desc, d.q.get(), d.k_cache.get(), d.v_cache.get(), d.out.get(),
                                          d.workspace.get(), stream);
  if (!st.ok()) return ::testing::AssertionFailure() << "paged_attention: " << st.to_string();
  const cudaError_t e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess) return ::testing::AssertionFailure() << "kernel failed: " << cudaGetErrorString(e);
  std::vector<uint16_t> bits(static_cast<size_t>(p.q.numel()));
  if (cudaMemcpy(bits.data(), d.out.get(), bits.size() * 2, cudaMemcpyDeviceToHost) != cudaSuccess)
    return ::testing::AssertionFailure() << "download failed";
  result->resize(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) (*result)[i] = widen(p.dtype, bits[i]);
  return ::testing::AssertionSuccess();
}

struct Metrics {
  double rel_l2 = 0, max_abs = 0, max_ref = 0;
  int64_t nonfinite = 0, worst = -1;
};

inline Metrics compare(const std::vector<float>& got, const Tensor& ref) {
  Metrics m;
  const float* r = ref.data_as<float>();
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double a = got[i], b = r[i];
    if (!std::isfinite(a) || !std::isfinite(b)) {
      if (m.nonfinite++ == 0) m.worst = static_cast<int64_t>(i);
      continue;
    }
    num += (a - b) * (a - b);
    den += b * b;
    m.max_ref = std::max(m.max_ref, std::fabs(b));
    if (std::fabs(a - b) > m.max_abs) {
      m.max_abs = std::fabs(a - b);
      if (m.nonfinite == 0) m.worst = static_cast<int64_t>(i);
    }
  }
  m.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return m;
}

// Tolerance. Inputs are bf16/f16-rounded and the reference sees exactly those values, so the
// differences come from (a) rounding the output to bf16/f16 once (relative 2^-9 / 2^-12 per
// element), (b) rounding the probabilities P to the storage type before the P V mma (as
// FlashAttention does; unbiased, averages out over keys), and (c) f32 instead of f64
// accumulation (~1e-6). Measured on an H200 (2026-11-29, six full runs of 154-170 cases): worst
// relative L2 2.5e-3 and worst max |out - ref| 3.8e-3 * max |ref|. The bounds leave ~4-5x margin:
// relative L2 < 1e-2 and max |out - ref| < 2e-2 * max |ref|. NaN/inf (an unwritten output, a
// read of a poisoned cache slot or workspace entry) never passes.
constexpr double kRelL2Tol = 1e-2;
constexpr double kMaxAbsTol = 2e-2;

inline ::testing::AssertionResult within_tolerance(const Metrics& m, const Problem& p) {
  std::ostringstream os;
  os << "rel_l2 " << m.rel_l2 << " max_abs " << m.max_abs << " max|ref| " << m.max_ref << " non-finite "
     << m.nonfinite;
  if (m.worst >= 0) {
    const int64_t per_token = int64_t{p.q_heads} * p.head_dim;
    os << " (worst at token " << m.worst / per_token << " head " << (m.worst % per_token) / p.head_dim
       << " dim " << m.worst % p.head_dim << ")";
  }
  os << " | " << p.describe();
  if (m.nonfinite == 0 && m.rel_l2 < kRelL2Tol && m.max_abs <= kMaxAbsTol * m.max_ref)
    return ::testing::AssertionSuccess() << os.str();
  return ::testing::AssertionFailure() << os.str();
}

}  // namespace loom::backends::cuda::testing
