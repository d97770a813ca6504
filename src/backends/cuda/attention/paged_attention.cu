// Host side of paged attention: descriptor validation, the launch plan (kernel choice,
// context splits, workspace), and dispatch to the decode / prefill / combine kernels (head_dim
// 64, 80, 128) or the CUDA-core fallback (any other multiple of 8 in [8, 256]).
#include "backends/cuda/attention/paged_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "backends/cuda/attention/attention_internal.cuh"
#include "backends/cuda/cuda_check.h"

namespace loom::backends::cuda {
namespace {

using attention_detail::kDecodeRows;
using attention_detail::KernelArgs;
using attention_detail::kTileRows;

// Split targets. Two decode CTAs are resident per SM (~106 KB of shared memory each at
// head_dim 128); the plan aims for one full wave of them (2 x SMs CTAs), and a split never
// gets fewer than kDecodeMinKeys keys of the bound. The prefill kernel splits only when its
// CTAs would not fill the GPU once.
constexpr int kDecodeCtasPerSm = 2;
constexpr int kDecodeMinKeys = 128;
constexpr int kDecodeMaxSplits = 256;
constexpr int kPrefillCtasPerSm = 2;
constexpr int kPrefillMinKeys = 512;
constexpr int kPrefillMaxSplits = 16;
constexpr int kMaxGridYZ = 65535;
constexpr size_t kWorkspaceAlign = 256;

struct Plan {
  bool generic = false;       // the CUDA-core fallback (head dims without a tensor-core kernel)
  bool generic_wide = false;  // generic: kGenericWideRows-row CTAs (else kGenericNarrowRows)
  bool decode = false;
  int num_splits = 1;
  int head_chunks = 1;  // decode: 16-row chunks of a sequence's packed rows
  int row_tiles = 0;    // prefill / generic: row tiles per (sequence, kv head)
};

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// A cached attribute of the current device; `fallback` (H100/H200 values) when it cannot be
// read, so that the plan stays defined.
int device_attribute(cudaDeviceAttr attr, int fallback) {
  static std::atomic<int> cache[2][64] = {};
  const int which = attr == cudaDevAttrMultiProcessorCount ? 0 : 1;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64) {
    cudaGetLastError();
    return fallback;
  }
  int n = cache[which][dev].load(std::memory_order_relaxed);
  if (n > 0) return n;
  if (cudaDeviceGetAttribute(&n, attr, dev) != cudaSuccess || n <= 0) {
    cudaGetLastError();
    return fallback;
  }
  cache[which][dev].store(n, std::memory_order_relaxed);
  return n;
}
int sm_count() {
  return device_attribute(cudaDevAttrMultiProcessorCount, 132);
}
int smem_per_block_optin() {
  return device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, 232448);
}

// Head dims with tensor-core decode / prefill kernels; the others (multiples of 8 in
// [8, 256]) run on the generic kernel.
bool specialised_head_dim(int head_dim) {
  return head_dim == 64 || head_dim == 80 || head_dim == 128;
}

// Assumes validate() passed. Depends only on host-side fields and two device constants (SM
// count, shared memory per block).
Plan make_plan(const PagedAttentionDesc& d) {
  Plan p;
  const int group = d.q_heads / d.kv_heads;
  const int sms = sm_count();
  const int64_t bound = std::max<int64_t>(d.max_kv_len_bound, 1);
  const int64_t packed_rows = int64_t{d.max_q_len} * group;
  if (!specialised_head_dim(d.head_dim)) {
    // No split (workspace 0). Tall CTAs amortise each K/V tile over more rows; decode-like
    // batches (or a device whose per-block shared memory cannot hold the tall tile) use short.
    p.generic = true;
    p.generic_wide =
        packed_rows > attention_detail::kGenericNarrowRows &&
        attention_detail::generic_smem_bytes(d.head_dim, true) <= static_cast<size_t>(smem_per_block_optin());
    p.row_tiles =
        static_cast<int>(ceil_div(packed_rows, p.generic_wide ? attention_detail::kGenericWideRows
                                                              : attention_detail::kGenericNarrowRows));
    return p;
  }
  // The decode kernel's 3-stage pipeline (110 KB at head_dim 128) exceeds sm_89's 99 KB per
  // block; there the prefill kernel (71 KB) serves decode batches too.
  const bool decode_fits =
      attention_detail::decode_smem_bytes(d.head_dim) <= static_cast<size_t>(smem_per_block_optin());
  if (decode_fits && (d.max_q_len <= 1 || packed_rows <= kDecodeRows)) {
    p.decode = true;
    p.head_chunks = static_cast<int>(ceil_div(packed_rows, kDecodeRows));
    const int64_t base = int64_t{d.num_seqs} * d.kv_heads * p.head_chunks;
    int64_t splits = ceil_div(int64_t{kDecodeCtasPerSm} * sms, std::max<int64_t>(base, 1));
    splits = std::min<int64_t>(splits, ceil_div(bound, kDecodeMinKeys));
    p.num_splits = static_cast<int>(std::clamp<int64_t>(splits, 1, kDecodeMaxSplits));
  } else {
    p.row_tiles = static_cast<int>(ceil_div(int64_t{d.max_q_len} * group, kTileRows));
    // Non-empty CTAs: at most one partial tile per sequence beyond the packed rows.
    const int64_t ctas = std::min<int64_t>(int64_t{d.num_seqs} * p.row_tiles,
                                           ceil_div(int64_t{d.num_tokens} * group, kTileRows) + d.num_seqs) *
                         d.kv_heads;
    int64_t splits = 1;
    if (ctas < sms) {
      splits = ceil_div(int64_t{kPrefillCtasPerSm} * sms, std::max<int64_t>(ctas, 1));
      splits = std::min<int64_t>(splits, ceil_div(bound, kPrefillMinKeys));
      splits = std::min<int64_t>(splits, kMaxGridYZ / std::max(d.num_seqs, 1));
    }
    p.num_splits = static_cast<int>(std::clamp<int64_t>(splits, 1, kPrefillMaxSplits));
  }
  return p;
}

// Host-side fields only (workspace sizing must not need the device arrays).
core::Status validate(const PagedAttentionDesc& d) {
  if (d.dtype != core::DType::kBF16 && d.dtype != core::DType::kF16)
    return core::unsupported("paged_attention: dtype " + std::string(core::dtype_name(d.dtype)) +
                             " (want bf16 or f16)");
  if (!specialised_head_dim(d.head_dim) &&
      (d.head_dim < attention_detail::kGenericMinHeadDim ||
       d.head_dim > attention_detail::kGenericMaxHeadDim || d.head_dim % 8 != 0))
    return core::unsupported("paged_attention: head_dim " + std::to_string(d.head_dim) +
                             " (supported: multiples of 8 in [8, 256])");
  if (d.num_seqs < 0 || d.num_tokens < 0 || d.max_q_len < 0)
    return core::invalid_argument("paged_attention: negative num_seqs / num_tokens / max_q_len");
  if (d.q_heads <= 0 || d.kv_heads <= 0 || d.q_heads % d.kv_heads != 0)
    return core::invalid_argument("paged_attention: q_heads " + std::to_string(d.q_heads) +
                                  " is not a positive multiple of kv_heads " + std::to_string(d.kv_heads));
  if (!(d.scale > 0.0f) || !std::isfinite(d.scale))
    return core::invalid_argument("paged_attention: scale " + std::to_string(d.scale) + " (want finite > 0)");
  if (d.block_size <= 0 || d.max_blocks_per_seq < 0 || d.sliding_window < 0)
    return core::invalid_argument("paged_attention: block_size " + std::to_string(d.block_size) +
                                  ", max_blocks_per_seq " + std::to_string(d.max_blocks_per_seq) +
                                  ", sliding_window " + std::to_string(d.sliding_window));
  if (d.num_tokens > 0) {
    if (d.num_seqs == 0 || d.max_q_len == 0)
      return core::invalid_argument("paged_attention: " + std::to_string(d.num_tokens) + " tokens but " +
                                    std::to_string(d.num_seqs) + " sequences, max_q_len " +
                                    std::to_string(d.max_q_len));
    if (int64_t{d.max_q_len} > d.num_tokens || int64_t{d.max_q_len} > d.max_kv_len_bound)
      return core::invalid_argument("paged_attention: max_q_len " + std::to_string(d.max_q_len) +
                                    " exceeds num_tokens " + std::to_string(d.num_tokens) +
                                    " or max_kv_len_bound " + std::to_string(d.max_kv_len_bound));
    if (d.num_seqs > kMaxGridYZ)
      return core::out_of_range("paged_attention: " + std::to_string(d.num_seqs) + " sequences (max " +
                                std::to_string(kMaxGridYZ) + ")");
    if (int64_t{d.kv_heads} * ceil_div(d.q_heads / d.kv_heads, kDecodeRows) > kMaxGridYZ)
      return core::out_of_range("paged_attention: too many kv heads");
    if (int64_t{d.max_q_len} * (d.q_heads / d.kv_heads) > INT32_MAX)
      return core::out_of_range("paged_attention: max_q_len x GQA group exceeds 2^31 rows");
  }
  return core::Status::ok_status();
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

size_t workspace_for(const PagedAttentionDesc& d, const Plan& p) {
  if (p.num_splits <= 1) return 0;
  const size_t rows = size_t{static_cast<size_t>(p.num_splits)} * d.num_tokens * d.q_heads;
  const size_t o_bytes =
      (rows * d.head_dim * sizeof(float) + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  return o_bytes + rows * sizeof(float);
}

}  // namespace

namespace attention_detail {

cudaError_t ensure_smem_limit(const void* kernel, int bytes) {
  static std::mutex mu;
  static std::vector<std::tuple<const void*, int, int>> done;  // (kernel, device, bytes)
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  std::lock_guard<std::mutex> lock(mu);
  for (const auto& [k, dv, b] : done)
    if (k == kernel && dv == dev && b >= bytes) return cudaSuccess;
  e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  if (e == cudaSuccess) done.emplace_back(kernel, dev, bytes);
  return e;
}

}  // namespace attention_detail

size_t paged_attention_workspace_bytes(const PagedAttentionDesc& desc) {
  if (!validate(desc).ok() || desc.num_tokens == 0) return 0;
  return workspace_for(desc, make_plan(desc));
}

core::Status paged_attention(const PagedAttentionDesc& desc, const void* q, const void* k_cache,
                             const void* v_cache, void* out, void* workspace, cudaStream_t stream) {
  LOOM_RETURN_IF_ERROR(validate(desc));
  if (desc.num_tokens == 0) return core::Status::ok_status();
  if (!desc.q_indptr || !desc.kv_lens || !desc.block_table)
    return core::invalid_argument("paged_attention: null q_indptr / kv_lens / block_table");
  if (!q || !k_cache || !v_cache || !out)
    return core::invalid_argument("paged_attention: null q / k_cache / v_cache / out");
  if (!aligned16(q) || !aligned16(k_cache) || !aligned16(v_cache) || !aligned16(out))
    return core::invalid_argument("paged_attention: q, caches and out must be 16-byte aligned");

  const Plan plan = make_plan(desc);
  const size_t ws_bytes = workspace_for(desc, plan);
  if (ws_bytes > 0 &&
      (workspace == nullptr || (reinterpret_cast<uintptr_t>(workspace) % kWorkspaceAlign) != 0))
    return core::invalid_argument("paged_attention: needs a 256-byte aligned workspace of " +
                                  std::to_string(ws_bytes) + " bytes");

  KernelArgs a;
  a.q = q;
  a.k_cache = k_cache;
  a.v_cache = v_cache;
  a.out = out;
  if (ws_bytes > 0) {
    const size_t rows = size_t{static_cast<size_t>(plan.num_splits)} * desc.num_tokens * desc.q_heads;
    const size_t o_bytes =
        (rows * desc.head_dim * sizeof(float) + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    a.ws_o = static_cast<float*>(workspace);
    a.ws_lse = reinterpret_cast<float*>(static_cast<char*>(workspace) + o_bytes);
  }
  a.q_indptr = desc.q_indptr;
  a.kv_lens = desc.kv_lens;
  a.block_table = desc.block_table;
  a.num_seqs = desc.num_seqs;
  a.num_tokens = desc.num_tokens;
  a.q_heads = desc.q_heads;
  a.kv_heads = desc.kv_heads;
  a.group = desc.q_heads / desc.kv_heads;
  a.block_size = desc.block_size;
  a.max_blocks_per_seq = desc.max_blocks_per_seq;
  a.max_q_len = desc.max_q_len;
  a.num_splits = plan.num_splits;
  a.head_chunks = plan.head_chunks;
  a.window = desc.sliding_window;
  a.causal = desc.causal;
  a.scale_log2 = desc.scale * attention_detail::kLog2e;

  const bool bf16 = desc.dtype == core::DType::kBF16;
  if (plan.generic) {
    LOOM_CUDA_TRY(
        attention_detail::launch_generic(a, bf16, desc.head_dim, plan.generic_wide, plan.row_tiles, stream));
    return core::Status::ok_status();
  }
  if (plan.decode)
    LOOM_CUDA_TRY(attention_detail::launch_decode(a, bf16, desc.head_dim, stream));
  else
    LOOM_CUDA_TRY(attention_detail::launch_prefill(a, bf16, desc.head_dim, plan.row_tiles, stream));
  if (plan.num_splits > 1) LOOM_CUDA_TRY(attention_detail::launch_combine(a, bf16, desc.head_dim, stream));
  return core::Status::ok_status();
}

}  // namespace loom::backends::cuda
