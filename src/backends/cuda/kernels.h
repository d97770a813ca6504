// Elementwise and row-wise kernels of the decoder and the vision towers: embedding / row gather,
// RMSNorm (plain, fused with the residual add, per head), LayerNorm, rotary embeddings (NeoX and
// multimodal M-RoPE), SiLU-and-mul, GELU, KV-cache writes, casts and adds.
//
// Contract shared by every function here:
//   - Raw device pointers, sizes in elements, and a stream; the work is enqueued on `stream` and
//     the call returns at once. The returned Status carries argument errors (InvalidArgument:
//     an unsupported dtype, a negative size, a misfit stride) and the launch error
//     (cudaGetLastError, so also a sticky fault from earlier work on the device).
//   - Storage is bf16 or f16 ("half" below; f32 where stated); all arithmetic is f32 and each
//     output element is rounded to its storage type once (round to nearest even).
//   - 16-byte vector loads/stores are used when the row length, strides and pointers allow
//     (multiples of 8 halves and 16-byte aligned); otherwise a scalar path computes the same.
//   - Device-side indices (ids, positions, slots) are not visible to the host: an id or position
//     out of range produces NaN in the affected output (never an out-of-bounds read); a KV slot
//     >= the cache's capacity is a bug and traps the kernel (the next CUDA call then fails).
//   - Nothing allocates and nothing synchronises the host, so every call can be captured into a
//     CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace loom::backends::cuda {

// ---- gathers ------------------------------------------------------------------------------------

// out[t, :] = table[ids[t], :] for t < count. table [table_rows, row_elems], out [count, row_elems],
// both contiguous, of `dtype` (f32/bf16/f16). Embedding lookup (table = embedding matrix, ids =
// token ids) and row selection (table = activations [T, H], ids = row indices, e.g. the last
// token of each sequence before the LM head). ids[t] outside [0, table_rows) -> a NaN row.
core::Status gather_rows(const void* table, int64_t table_rows, int64_t row_elems, core::DType dtype,
                         const int32_t* ids, int64_t count, void* out, cudaStream_t stream);

// ---- normalisation ------------------------------------------------------------------------------

// A norm weight vector [hidden] in f32 (preferred: convert once at load), bf16 or f16.
struct NormWeight {
  const void* data = nullptr;
  core::DType dtype = core::DType::kF32;
};

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight, rows of `hidden` half elements,
// contiguous [rows, hidden]. y may alias x.
core::Status rms_norm(const void* x, const NormWeight& weight, float eps, void* y, int64_t rows,
                      int64_t hidden, core::DType dtype, cudaStream_t stream);

// The pre-norm residual step of a decoder layer, as transformers runs it in bf16:
//   residual = round(residual + x)       (added in f32, rounded once to the storage type)
//   y        = rms_norm(residual)        (of that rounded value)
// residual (in/out), x, y: [rows, hidden] half. y must not alias residual; it may alias x.
core::Status add_rms_norm(void* residual, const void* x, const NormWeight& weight, float eps, void* y,
                          int64_t rows, int64_t hidden, core::DType dtype, cudaStream_t stream);

// torch LayerNorm row-wise: y[r, :] = (x[r, :] - mean) / sqrt(var + eps) * weight + bias, with the
// biased variance (mean of squared deviations, computed in a second pass over the row: no
// E[x^2] - mean^2 cancellation). Rows of `hidden` elements of `dtype` (f32/bf16/f16), contiguous
// [rows, hidden]; weight and bias [hidden] f32/bf16/f16; bias.data == nullptr means no bias.
// y may alias x.
core::Status layer_norm(const void* x, const NormWeight& weight, const NormWeight& bias, float eps, void* y,
                        int64_t rows, int64_t hidden, core::DType dtype, cudaStream_t stream);

// A view of per-head vectors inside an activation: element (t, h, d) of [tokens, heads, head_dim]
// is at data[t * token_stride + h * head_dim + d]. token_stride 0 means heads * head_dim
// (contiguous). With a fused qkv projection [T, (Hq + 2*Hkv) * D], q is {qkv, T, Hq, D, stride},
// k is {qkv + Hq*D, T, Hkv, D, stride}, and q and k together (they are adjacent) are
// {qkv, T, Hq + Hkv, D, stride}, so one rope / head_rms_norm call covers both when they share
// the same tables / weights.
struct HeadView {
  void* data = nullptr;
  int64_t tokens = 0, heads = 0, head_dim = 0;
  int64_t token_stride = 0;  // elements; 0 => heads * head_dim
  core::DType dtype = core::DType::kBF16;
};

// In place: each head vector (row of head_dim) is RMS-normalised with weight [head_dim]
// (Qwen3's q_norm / k_norm).
core::Status head_rms_norm(const HeadView& x, const NormWeight& weight, float eps, cudaStream_t stream);

// ---- rotary embeddings --------------------------------------------------------------------------

// cos/sin tables [max_positions, rotary_dim / 2] f32 (models/rope.h makes them; the attention
// scaling factor is already folded in).
struct RopeTables {
  const float* cos = nullptr;
  const float* sin = nullptr;
  int64_t max_positions = 0;
  int32_t rotary_dim = 0;  // even, <= head_dim; dims beyond pass through untouched
};

// In place on x, NeoX / "rotate_half" layout: with half = rotary_dim / 2, for i < half,
//   x[i]        = x[i] * cos[p, i] - x[i + half] * sin[p, i]
//   x[i + half] = x[i + half] * cos[p, i] + x[i] * sin[p, i]
// where p = positions[t] (device, [tokens]).
core::Status rope_neox(const HeadView& x, const int32_t* positions, const RopeTables& tables,
                       cudaStream_t stream);

// Multimodal RoPE (Qwen2-VL / Qwen2.5-VL / Qwen2.5-Omni, and Qwen3-VL's interleaved variant).
// positions: device [3, pos_stride] int32: rows t (temporal), h (height), w (width), token t at
// column t (pos_stride >= tokens; text tokens carry the same value in all three rows).
// Frequency index i (< half) takes its angle from position row r(i), then rotates as rope_neox:
//   chunked (interleaved = false; transformers' Qwen2.5-VL `recomposition_frequencies`, i.e.
//     apply_multimodal_rotary_pos_emb: freqs.split(mrope_section) and chunk j uses row j % 3):
//     section = {s_t, s_h, s_w} with s_t + s_h + s_w == half; r(i) = 0 for i < s_t, 1 for
//     i < s_t + s_h, else 2.
//   interleaved (interleaved = true; Qwen3-VL's `apply_interleaved_mrope`, layout THWTHW...TT):
//     r(i) = 1 if i % 3 == 1 and i < 3 * s_h; 2 if i % 3 == 2 and i < 3 * s_w; else 0.
// The same r(i) applies to i and i + half (transformers concatenates the recomposed halves).
struct MropeSection {
  int32_t t = 0, h = 0, w = 0;  // counts of frequency pairs
  bool interleaved = false;
};
core::Status rope_mrope(const HeadView& x, const int32_t* positions, int64_t pos_stride,
                        const RopeTables& tables, const MropeSection& section, cudaStream_t stream);

// ---- MLP ----------------------------------------------------------------------------------------

// gate_up [tokens, 2 * inter] = [gate | up] -> out [tokens, inter] = silu(gate) * up, with
// silu(g) = g / (1 + exp(-g)). Half storage, contiguous.
core::Status silu_mul(const void* gate_up, void* out, int64_t tokens, int64_t inter, core::DType dtype,
                      cudaStream_t stream);

// y[i] = gelu(x[i]) for i < n; exact 0.5 x (1 + erf(x / sqrt 2)) or, with tanh_approx, torch's
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). f32/bf16/f16, contiguous; y may alias x.
core::Status gelu(const void* x, void* y, int64_t n, bool tanh_approx, core::DType dtype,
                  cudaStream_t stream);

// ---- KV cache -----------------------------------------------------------------------------------

// Paged caches [num_blocks, block_size, kv_heads, head_dim] (vLLM / FlashInfer "NHD" layout),
// flat slot s = block * block_size + offset.
struct KvCacheView {
  void* k = nullptr;
  void* v = nullptr;
  int64_t num_blocks = 0, block_size = 0, kv_heads = 0, head_dim = 0;
  core::DType dtype = core::DType::kBF16;
};

// Copies k/v rows (views of [tokens, kv_heads, head_dim], read only; same dtype as the cache)
// into slot slot_mapping[t] of the caches. Slots < 0 are skipped (padding tokens, e.g. of a
// CUDA-graph batch); a slot >= num_blocks * block_size traps.
core::Status write_kv(const HeadView& k, const HeadView& v, const int32_t* slot_mapping,
                      const KvCacheView& cache, cudaStream_t stream);

// ---- casts and adds -----------------------------------------------------------------------------

// dst[i] = src[i] converted (RNE) for i < n; dtypes f32/bf16/f16 in any combination.
core::Status cast(const void* src, core::DType src_dtype, void* dst, core::DType dst_dtype, int64_t n,
                  cudaStream_t stream);

// out[i] = a[i] + b[i] (f32 add, one rounding) for i < n; f32/bf16/f16; out may alias a or b.
core::Status add(const void* a, const void* b, void* out, int64_t n, core::DType dtype, cudaStream_t stream);

}  // namespace loom::backends::cuda
