// Token sampling on the GPU over a batch of logits rows, with the semantics of the CPU sampler
// (src/engine/sampler.h, vLLM v1's order), so that the same logits, parameters and uniform draw
// give the same token and logprobs on either side:
//
//   raw logits ──► raw logprobs: log_softmax of the RAW row; the sampled token's logprob and the
//       │          top num_logprobs entries (highest first, ties by lower id)
//       ▼ adjustments: per-row (id, value) pairs added to the logits (OpenAI logit_bias; the
//       │          engine also masks eos / stop ids with value -inf while output < min_tokens)
//       ▼ penalties: repetition over the distinct ids of prompt + output (x > 0 ? x / r : x * r),
//       │          then x -= frequency * count_in_output, then x -= presence if count_in_output > 0
//       ├──► greedy: argmax, ties -> lowest id
//       ▼ temperature t' = max(t, 1e-2), x /= t' (skipped when t' == 1) ─► min_p: mask
//         x - max < log(min_p) ─► top_k: keep x >= the k-th largest (ties at the k-th all stay;
//         k <= 0 or k >= vocab: off) ─► top_p: in order of decreasing x (ties: lower id first)
//         keep a token while the mass before it is < p * total (p >= 1 or one candidate: off)
//         ─► draw: inverse CDF in id order over the kept tokens with weights exp(x - max):
//         the first kept id whose running sum (double) exceeds u * sum, else the last kept id.
//
// Probability sums are accumulated in double, everything else in f32, as on the CPU. The exp and
// log of the GPU are not bit-identical to glibc's, so a decision that sits within float noise of a
// boundary (a top-p cut, a draw landing on a CDF step) may differ; anything else is identical.
//
// Host side: fill one SamplingRowParams per row from engine::SamplingParams as
//   temperature = float(temperature), top_p = float(top_p), top_k = top_k, min_p = float(min_p),
//   repetition/presence/frequency = float(...), greedy = is_greedy(), num_logprobs = logprobs
// and draw the uniform of each non-greedy row with that sequence's SamplerRng::next_double()
// (greedy rows draw nothing, as on the CPU), so seeded requests reproduce across backends.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/status.h"

namespace loom::backends::cuda {

// Most top logprobs per row (OpenAI's limit, engine::kMaxLogprobs).
inline constexpr int32_t kMaxTopLogprobs = 20;

// Per-row sampling parameters (POD; a device array with one entry per logits row).
struct SamplingRowParams {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;  // <= 0: off
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t greedy = 0;         // nonzero: argmax after adjustments and penalties
  int32_t num_logprobs = -1;  // -1: none; 0..kMaxTopLogprobs: the token's logprob + this many top entries
};
static_assert(sizeof(SamplingRowParams) == 36, "SamplingRowParams is shared with the host bit for bit");

// Per-row token history for penalties, CSR over all rows (device arrays):
//   row b's tokens are ids[offsets[b] .. offsets[b+1]); among them ids[output_begin[b] ..
//   offsets[b+1]) are the generated (output) tokens, the ones before are the prompt.
// Repetition counts distinct ids of prompt and output; presence/frequency count output only.
// Ids outside [0, vocab) are ignored. total_tokens (= offsets[rows], known to the host) sizes the
// work; 0 (or null ids) disables penalties for the whole batch.
struct TokenHistory {
  const int32_t* ids = nullptr;
  const int32_t* offsets = nullptr;       // [rows + 1], offsets[0] == 0
  const int32_t* output_begin = nullptr;  // [rows], offsets[b] <= output_begin[b] <= offsets[b+1]
  int64_t total_tokens = 0;
};

// Per-row additive logit adjustments, CSR (device arrays): row b adds values[j] to logit ids[j]
// for j in [offsets[b], offsets[b+1]); repeated ids add up; -inf masks. Ids outside [0, vocab)
// are ignored. total (= offsets[rows]) 0 or null ids: none.
struct LogitAdjustments {
  const int32_t* ids = nullptr;
  const float* values = nullptr;
  const int32_t* offsets = nullptr;  // [rows + 1]
  int64_t total = 0;
};

struct SamplingBatch {
  const void* logits = nullptr;                  // [rows, vocab], rows row_stride elements apart
  core::DType logits_dtype = core::DType::kF32;  // f32 or bf16 (or f16)
  int64_t row_stride = 0;                        // 0 => vocab
  int32_t rows = 0;
  int32_t vocab = 0;
  const SamplingRowParams* params = nullptr;  // device [rows]
  const double* uniforms = nullptr;           // device [rows] in [0, 1) (required; read for non-greedy rows)
  TokenHistory history;                       // optional
  LogitAdjustments adjustments;               // optional
};

// Device outputs. logprobs[b] is written when num_logprobs >= 0; top_ids/top_logprobs rows
// (kMaxTopLogprobs entries each) hold num_logprobs entries followed by (-1, -inf) padding when
// num_logprobs >= 0, and are untouched otherwise. tokens[b] is -1 when every token was masked
// (the CPU sampler treats that as a bug; the caller decides).
struct SamplingOutputs {
  int32_t* tokens = nullptr;      // [rows]
  float* logprobs = nullptr;      // [rows]
  int32_t* top_ids = nullptr;     // [rows, kMaxTopLogprobs]
  float* top_logprobs = nullptr;  // [rows, kMaxTopLogprobs]
};

// Device scratch that sample() needs for `rows` x `vocab` with `history_tokens` history ids in
// total: an f32 copy of the rows that need processing, per-row statistics, and a hash table for
// the distinct-id penalties. Allocate it once for the largest batch (e.g. in the DeviceArena).
size_t sampling_workspace_bytes(int32_t rows, int32_t vocab, int64_t history_tokens);

// Enqueues the whole sampling step on `stream`: no allocation, no host synchronisation (so it can
// be captured in a CUDA graph for fixed rows / history sizes). Rows whose parameters are greedy
// with nothing to adjust or penalise are finished by the raw pass (one read of the row, plus a
// second one when top logprobs are asked for).
core::Status sample(const SamplingBatch& batch, const SamplingOutputs& out, void* workspace,
                    size_t workspace_bytes, cudaStream_t stream);

}  // namespace loom::backends::cuda
