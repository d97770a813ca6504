// The op interface every backend implements. Models call ops only through this
// interface, so the CPU reference (ops/reference_ops.h, the test oracle), the fast CPU
// backend (backends/cpu) and the CUDA backend are interchangeable beneath them.
//
// Conventions: all activations are row-major f32 on the CPU backends ([tokens, features]);
// weights may be f32, bf16 or f16 (the backend upcasts as it computes). Outputs are
// written into caller-allocated tensors of the stated shape and are fully overwritten.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace loom::ops {

using core::Tensor;

// Describes a batch of sequences whose new tokens are flattened into one token
// dimension, with KV history in a paged cache (vLLM / FlashInfer style).
//   sequence s owns query rows [q_indptr[s], q_indptr[s+1]) of q/out;
//   its context (history + the new tokens) has kv_lens[s] tokens;
//   its new tokens sit at positions kv_lens[s] - q_len .. kv_lens[s]-1;
//   token t of its context lives in block block_table[s * max_blocks_per_seq + t / block_size],
//   slot t % block_size.
struct PagedAttentionParams {
  std::span<const int32_t> q_indptr;     // [num_seqs + 1]
  std::span<const int32_t> kv_lens;      // [num_seqs]
  std::span<const int32_t> block_table;  // [num_seqs * max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 16;
  float scale = 1.0f;            // usually 1/sqrt(head_dim)
  bool causal = true;            // query i may see context positions <= its own
  int32_t sliding_window = 0;    // 0 = unlimited; else keys with pos > qpos - window
  int32_t max_kv_len_bound = 0;  // 0 = max(kv_lens); a fixed bound lets a device backend replay
                                 // the same launch (CUDA graphs) as lengths grow
};

// Rotary embedding layout: Qwen/Llama "rotate_half" (NeoX) style: dims [0, rot/2) pair
// with [rot/2, rot). cos/sin tables are [max_positions, rot/2].
struct RopeParams {
  int32_t rotary_dim = 0;  // <= head_dim; dims beyond rotary_dim pass through
};

// One row of on-device sampling (Ops::sample): the subset of the sampler's settings a device
// path handles without token history (no penalties, no logit bias, no min_tokens masking).
struct DeviceSampleRow {
  float temperature = 1.0f;  // used when !greedy
  float top_p = 1.0f;
  int32_t top_k = 0;  // <= 0: off
  float min_p = 0.0f;
  bool greedy = true;
  int32_t num_logprobs = -1;  // -1: none
  double uniform = 0.0;       // the row's draw in [0, 1) (ignored when greedy)
};

struct DeviceSampleResult {
  int32_t token = -1;
  float logprob = 0.0f;                        // raw logprob of token (when num_logprobs >= 0)
  std::vector<std::pair<int32_t, float>> top;  // top num_logprobs raw logprobs, highest first
};

// Where a forward stands with respect to a CUDA graph (Ops::graph_begin).
enum class GraphStep {
  kEager,    // ops run as usual (no graph, or the key's first use: it warms GEMM plans)
  kCapture,  // ops are recorded into a graph that graph_end then launches
  kReplay,   // ops only allocate (their launches are in the graph); graph_end launches it
};

class Ops {
 public:
  virtual ~Ops() = default;
  virtual const char* name() const = 0;

  // Allocates an uninitialised activation tensor on this backend's device. On device backends it
  // lives until the next forward starts (the next prepare_indices call).
  virtual Tensor empty(const core::Shape& shape, core::DType dtype) { return Tensor::empty(shape, dtype); }
  // Allocates an uninitialised tensor that lives as long as the backend (KV caches).
  virtual Tensor alloc(const core::Shape& shape, core::DType dtype) { return Tensor::empty(shape, dtype); }
  // The dtype activations and KV caches are kept in on this backend (f32 on the CPU).
  virtual core::DType activation_dtype() const { return core::DType::kF32; }

  // Moves a host tensor to this backend's device keeping its dtype (norm weights, rope tables);
  // the CPU returns it as is.
  virtual Tensor upload(const Tensor& host) { return host; }
  // Moves a weight matrix or bias to the device in the dtype the backend's GEMMs take (bf16 on
  // CUDA); the CPU returns it as is (its kernels read f32/bf16/f16 weights directly).
  virtual Tensor upload_weight(const Tensor& host) { return host; }
  // A host copy of a tensor of this backend (the CPU returns it as is).
  virtual Tensor to_host(const Tensor& t) { return t; }

  // A per-forward device copy of a host tensor, keeping its dtype (multimodal embeddings, per-token
  // rope tables): scratch memory like empty(), so call it after prepare_indices. The CPU returns
  // the host tensor as is.
  virtual Tensor upload_scratch(const Tensor& host) { return host; }

  // Samples rows of logits [rows, vocab] (f32) that live on this backend's device, with the
  // semantics of engine::Sampler for the settings in DeviceSampleRow. Returns false when the
  // backend has no such path; the caller then samples a host copy.
  virtual bool sample(const Tensor& logits, std::span<const DeviceSampleRow> rows,
                      std::vector<DeviceSampleResult>* out) {
    return false;
  }

  // Index arrays (token ids, positions, slot mappings, indptr, block tables) reach ops as host
  // spans. A forward announces all of them here first, once; a device backend uploads them in
  // one go and maps the same spans to their device copies in the calls that follow. The spans
  // must stay alive and unchanged until the next prepare_indices call.
  virtual void prepare_indices(std::initializer_list<std::span<const int32_t>> arrays) {}

  // Graphs (device backends). A forward whose every launch argument is fixed by `key` (same
  // shapes, same sizes of the announced index arrays, so the same scratch addresses) brackets
  // its ops with graph_begin (after prepare_indices) and graph_end. The backend runs the first
  // use eagerly, captures the second, and replays the graph afterwards; the caller must issue
  // the same sequence of ops every time and read nothing back in between.
  virtual bool supports_graphs() const { return false; }
  virtual GraphStep graph_begin(uint64_t key) { return GraphStep::kEager; }
  virtual void graph_end(uint64_t key) {}

  // out[t, :] = table[ids[t], :]; table [vocab, hidden] (f32/bf16/f16), out [T, hidden] f32.
  // On a device backend out is in activation_dtype() and the table must be in that dtype too.
  // The table may also be an activation tensor of this backend ([rows, features], e.g. from
  // empty()): then this is the row gather out[i, :] = x[ids[i], :] (window permutations, last-token
  // selection), exact on every backend (CPU: f32 rows; CUDA: the gather_rows kernel in the table's
  // dtype). There is no separate gather op for that reason. ids are announced through
  // prepare_indices like any index array.
  virtual void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) = 0;

  // y[M, N] = x[M, K] @ w[N, K]^T (+ bias[N] if defined). x, y f32; w f32/bf16/f16.
  virtual void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) = 0;

  // y = x / sqrt(mean(x^2) + eps) * weight, row-wise over the last dim. x, y [T, H].
  // y may alias x.
  virtual void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) = 0;

  // Fused residual: residual += x; y = rms_norm(residual). residual, x, y [T, H].
  virtual void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                            Tensor& y) = 0;

  // In place on x [T, heads, head_dim]: rotate each head at positions[t] using cos/sin
  // tables [max_pos, rotary_dim/2] (f32).
  virtual void rope(Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
                    const RopeParams& p) = 0;

  // torch LayerNorm over the last dim: y = (x - mean) / sqrt(var + eps) * weight + bias, with the
  // biased variance (mean of squared deviations). x, y [..., H] activations; weight [H] and bias [H]
  // f32/bf16/f16 (bias may be undefined: no bias). y may alias x.
  virtual void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                          Tensor& y) = 0;

  // Elementwise GELU of activations x (any shape), y the same shape; y may alias x.
  //   tanh_approx = false: exact 0.5 * x * (1 + erf(x / sqrt(2)))        (nn.GELU(), "gelu")
  //   tanh_approx = true:  0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
  //                        (nn.GELU(approximate="tanh"), "gelu_pytorch_tanh")
  virtual void gelu(const Tensor& x, Tensor& y, bool tanh_approx) = 0;

  // gate_up [T, 2*I] = [gate | up] -> out [T, I] = silu(gate) * up.
  virtual void silu_mul(const Tensor& gate_up, Tensor& out) = 0;

  // a += b (same shape, f32).
  virtual void add_inplace(Tensor& a, const Tensor& b) = 0;

  // Writes k/v rows [T, kv_heads, head_dim] into the paged caches
  // [num_blocks, block_size, kv_heads, head_dim] at flat slots slot_mapping[t]
  // (= block * block_size + offset).
  virtual void write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping,
                        Tensor& k_cache, Tensor& v_cache) = 0;

  // q [T, q_heads, head_dim], caches as in write_kv (already holding the new tokens),
  // out [T, q_heads, head_dim]. GQA: q head h reads kv head h / (q_heads / kv_heads).
  virtual void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                               const PagedAttentionParams& p, Tensor& out) = 0;
};

}  // namespace loom::ops
