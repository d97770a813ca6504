// Paged attention on NVIDIA GPUs: the CUDA implementation of ops::Ops::paged_attention
// (semantics in ops/ops.h; the CPU oracle is ops/reference_ops.cpp).
//
// A batch of sequences whose new query tokens are flattened into one token dimension:
//   sequence s owns query rows [q_indptr[s], q_indptr[s+1]) of q / out;
//   its context holds kv_lens[s] tokens (history + the new tokens, already in the cache);
//   query i of s sits at position kv_lens[s] - q_len + i;
//   causal: it sees keys at positions <= its own; non-causal: all kv_lens[s] keys;
//   sliding_window w > 0: additionally only keys at positions > qpos - w;
//   GQA: q head h reads kv head h / (q_heads / kv_heads).
// Layouts (row-major, bf16 or f16 storage; all arithmetic in f32, outputs rounded once):
//   q, out            [num_tokens, q_heads, head_dim]
//   k_cache, v_cache  [num_blocks, block_size, kv_heads, head_dim]
//   token t of sequence s lives in block block_table[s * max_blocks_per_seq + t / block_size],
//   slot t % block_size.
//
// Kernels for head_dim 64, 80 and 128 (on tensor cores, mma.sync m16n8k16): a split-K decode
// kernel when max_q_len == 1 or max_q_len * (q_heads / kv_heads) <= 16, a FlashAttention-2 style
// prefill kernel otherwise (it also handles the q_len == 1 rows of mixed batches), plus a
// combine kernel when the context is split. Any other head_dim that is a multiple of 8 in
// [8, 256] runs on a CUDA-core fallback kernel (f32 math, no split, no workspace). README.md
// in this folder describes them and the launch plan.
//
// CUDA graphs: the launch configuration (grid, number of splits, workspace size) depends only
// on the host-side fields of the descriptor (counts, max_q_len, max_kv_len_bound) and two
// device constants (SM count, shared memory per block), never on the device arrays. A call
// captured into a graph can therefore be replayed after the caller rewrites q_indptr /
// kv_lens / block_table in place, as long as every q_len stays <= max_q_len and the token
// count is unchanged.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace loom::backends::cuda {

struct PagedAttentionDesc {
  int32_t num_seqs = 0;    // entries in kv_lens; q_indptr has num_seqs + 1
  int32_t num_tokens = 0;  // rows of q / out (= q_indptr[num_seqs])
  int32_t q_heads = 0;
  int32_t kv_heads = 0;  // divides q_heads
  int32_t head_dim = 0;  // a multiple of 8 in [8, 256]; 64, 80, 128 run on tensor cores
  int32_t block_size = 0;
  int32_t max_blocks_per_seq = 0;
  // Host-known maximum over sequences of q_len. A device q_len above it is a caller bug
  // (the kernel traps). Small values select the decode kernel (see above).
  int32_t max_q_len = 0;
  // Host-known upper bound of kv_lens (e.g. max_model_len while capturing a graph). It only
  // chooses the number of context splits; results do not depend on it.
  int32_t max_kv_len_bound = 0;
  float scale = 1.0f;  // usually 1/sqrt(head_dim)
  bool causal = true;
  int32_t sliding_window = 0;              // 0 = unlimited
  core::DType dtype = core::DType::kBF16;  // of q, out and both caches: kBF16 or kF16
  // Device arrays.
  const int32_t* q_indptr = nullptr;     // [num_seqs + 1], q_indptr[0] == 0
  const int32_t* kv_lens = nullptr;      // [num_seqs], q_len <= kv_len <= max_blocks_per_seq * block_size
  const int32_t* block_table = nullptr;  // [num_seqs * max_blocks_per_seq]; entries past a
                                         // sequence's last used block are never read
};

// Bytes of device workspace paged_attention needs for this descriptor (0 when the context
// is not split). Depends only on host-side fields.
size_t paged_attention_workspace_bytes(const PagedAttentionDesc& desc);

// Enqueues the attention on `stream`. q, caches and out must be 16-byte aligned device
// pointers; workspace must hold paged_attention_workspace_bytes(desc) bytes (aligned to
// 256 bytes; may be null when that is 0). Returns a non-ok Status for unsupported
// configurations (dtype, head_dim), inconsistent descriptors and CUDA launch failures;
// errors of the kernels themselves surface at the next synchronisation.
core::Status paged_attention(const PagedAttentionDesc& desc, const void* q, const void* k_cache,
                             const void* v_cache, void* out, void* workspace, cudaStream_t stream);

}  // namespace loom::backends::cuda
