// GPU sampler, part 1: the entry point, the raw pass (raw logprobs, top-k logprobs, plain greedy
// argmax, the copy of rows that need processing), logit adjustments and penalties.
// Part 2 (sampling_select.cu) runs the temperature / min_p / top_k / top_p filters and the draw.
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/sampling_common.cuh"

namespace loom::backends::cuda {

using namespace detail;

namespace {

constexpr int kRawThreads = 512;
constexpr int kRawUnroll = 4;     // 16-byte vectors in flight per thread
constexpr int kScalarUnroll = 8;  // scalar loads in flight per thread
constexpr int kAdjustThreads = 256;
constexpr int kPenaltyThreads = 256;

size_t align256(size_t x) {
  return (x + 255) / 256 * 256;
}

int64_t work_stride_for(int32_t vocab) {
  return (static_cast<int64_t>(vocab) + 7) / 8 * 8;
}

// Online (max, sum of exp(x - max)) pairs: merge b into a.
__device__ __forceinline__ void merge_softmax(float& m, double& s, float om, double os) {
  if (om > m) {
    const float t = m;
    m = om;
    om = t;
    const double u = s;
    s = os;
    os = u;
  }
  if (om != kNegInf) s += os * static_cast<double>(expf(om - m));
}

// Candidate buffer of the top-logprob selection (entries >= the threshold tau below).
constexpr int kTopCandidates = 2048;

// Element i of a row in the caller's dtype.
template <typename T>
__device__ __forceinline__ float row_value(const T* row, int i) {
  return to_f32(row[i]);
}

// One block per row. Pass 1 (one read of the row): raw max and sum of exp (online, the sum in
// double), the argmax (ties -> lowest id), each thread's own max, and the f32 copy of rows that
// need processing. Thread t visits ids in increasing order (vectors of kV, strided by the block),
// so a strict '>' keeps the lowest id within a thread and block merges break ties by id.
//
// Top logprobs (pass 2, only when asked): tau = the ntop-th largest of the threads' maxima is a
// lower bound of the ntop-th largest logit (ntop threads each hold an element >= tau), so the top
// entries are among the elements >= tau, which are few for real logits: they are collected in
// shared memory and the top ntop picked from there by (value desc, id asc). If more than
// kTopCandidates elements tie at or above tau, ntop exact block-wide passes over the row are
// used instead.
template <typename T, int kV>
__global__ void __launch_bounds__(kRawThreads)
    raw_pass_kernel(const T* __restrict__ logits, int64_t row_stride, DeviceBatch d, SamplingOutputs out) {
  __shared__ float sv[32];
  __shared__ int32_t si[32];
  __shared__ float sm[32];
  __shared__ double ss[32];
  __shared__ float thread_max[kRawThreads];
  __shared__ float cand_v[kTopCandidates];
  __shared__ int32_t cand_i[kTopCandidates];
  __shared__ float s_tau;
  __shared__ int32_t s_count;
  const int b = blockIdx.x;
  const SamplingRowParams p = d.params[b];
  const bool needs = row_needs_work(d, b);
  const int ntop = p.num_logprobs < kMaxTopLogprobs ? p.num_logprobs : kMaxTopLogprobs;  // may be <= 0
  const T* row = logits + static_cast<int64_t>(b) * row_stride;
  float* wrow = d.work + static_cast<int64_t>(b) * d.work_stride;
  const int vocab = d.vocab;

  float m = kNegInf;  // running max of the finite logits seen
  double s = 0.0;     // sum of exp(x - m) over them
  float best_v = kNegInf;
  int32_t best_i = INT_MAX;
  float tmax = kNegInf;  // this thread's max, -inf included (threads without elements keep -inf)

  auto visit = [&](float x, int32_t i) {
    if (x > best_v) best_v = x, best_i = i;  // -inf never wins: an all -inf row has no argmax
    tmax = fmaxf(tmax, x);
    if (x != kNegInf) {
      if (x > m) {
        s = s * static_cast<double>(expf(m - x)) + 1.0;
        m = x;
      } else {
        s += static_cast<double>(expf(x - m));
      }
    }
  };

  // Loads are issued kRawUnroll at a time: one block streams a whole row, so it needs many bytes
  // in flight to approach the bandwidth.
  if constexpr (kV > 1) {
    const int step = blockDim.x * kV;
    for (int base0 = threadIdx.x * kV; base0 < vocab; base0 += step * kRawUnroll) {
      Vec16<T> v[kRawUnroll];
#pragma unroll
      for (int u = 0; u < kRawUnroll; ++u) {
        if (base0 + u * step < vocab) v[u] = load16(row + base0 + u * step);
      }
#pragma unroll
      for (int u = 0; u < kRawUnroll; ++u) {
        const int base = base0 + u * step;
        if (base >= vocab) break;
        float x[kV];
#pragma unroll
        for (int k = 0; k < kV; ++k) {
          x[k] = to_f32(v[u].v[k]);
          visit(x[k], base + k);
        }
        if (needs) {
#pragma unroll
          for (int k = 0; k < kV; k += 4) {
            *reinterpret_cast<float4*>(wrow + base + k) = make_float4(x[k], x[k + 1], x[k + 2], x[k + 3]);
          }
        }
      }
    }
  } else {
    const int step = blockDim.x;
    for (int i0 = threadIdx.x; i0 < vocab; i0 += step * kScalarUnroll) {
      float x[kScalarUnroll];
#pragma unroll
      for (int u = 0; u < kScalarUnroll; ++u)
        x[u] = i0 + u * step < vocab ? to_f32(row[i0 + u * step]) : 0.0f;
#pragma unroll
      for (int u = 0; u < kScalarUnroll; ++u) {
        const int i = i0 + u * step;
        if (i >= vocab) break;
        visit(x[u], i);
        if (needs) wrow[i] = x[u];
      }
    }
  }

  // Block-wide softmax statistics.
  {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float om = __shfl_xor_sync(0xffffffffu, m, o);
      const double os = __shfl_xor_sync(0xffffffffu, s, o);
      merge_softmax(m, s, om, os);
    }
    if (lane == 0) sm[warp] = m, ss[warp] = s;
    __syncthreads();
    m = kNegInf;
    s = 0.0;
    for (int w = 0; w < (blockDim.x >> 5); ++w) merge_softmax(m, s, sm[w], ss[w]);
  }
  const float log_sum = m == kNegInf ? 0.0f : static_cast<float>(log(s));
  block_best(best_v, best_i, sv, si);
  if (threadIdx.x == 0) {
    d.stats[b] = RawStats{m, log_sum};
    if (!needs) {
      const int32_t token = best_i == INT_MAX ? -1 : best_i;
      out.tokens[b] = token;
      if (p.num_logprobs >= 0) out.logprobs[b] = token >= 0 ? (best_v - m) - log_sum : kNegInf;
    }
  }
  if (p.num_logprobs < 0) return;  // uniform across the block
  int32_t* top_ids = out.top_ids + static_cast<int64_t>(b) * kMaxTopLogprobs;
  float* top_lps = out.top_logprobs + static_cast<int64_t>(b) * kMaxTopLogprobs;
  if (ntop > 0) {
    // tau: the ntop-th largest thread max (unique ranks: value desc, thread asc).
    thread_max[threadIdx.x] = tmax;
    if (threadIdx.x == 0) s_count = 0;
    __syncthreads();
    int rank = 0;
    for (int j = 0; j < static_cast<int>(blockDim.x); ++j) {
      const float o = thread_max[j];
      rank += (o > tmax || (o == tmax && j < static_cast<int>(threadIdx.x))) ? 1 : 0;
    }
    if (rank == ntop - 1) s_tau = tmax;
    __syncthreads();
    const float tau = s_tau;
    const int step = blockDim.x;
    for (int i0 = threadIdx.x; i0 < vocab; i0 += step * kScalarUnroll) {
      float x[kScalarUnroll];
#pragma unroll
      for (int u = 0; u < kScalarUnroll; ++u)
        x[u] = i0 + u * step < vocab ? row_value(row, i0 + u * step) : kNegInf;
#pragma unroll
      for (int u = 0; u < kScalarUnroll; ++u) {
        const int i = i0 + u * step;
        if (i < vocab && x[u] >= tau) {
          const int slot = atomicAdd(&s_count, 1);
          if (slot < kTopCandidates) cand_v[slot] = x[u], cand_i[slot] = i;
        }
      }
    }
    __syncthreads();
    const int count = s_count;
    float prev_v = __int_as_float(0x7f800000);  // +inf: the overflow path's "last winner"
    int32_t prev_i = -1;
    for (int r = 0; r < ntop; ++r) {  // uniform
      float wv = kNegInf;
      int32_t wi = INT_MAX;
      if (count <= kTopCandidates) {
        for (int j = threadIdx.x; j < count; j += blockDim.x) {
          if (better(cand_v[j], cand_i[j], wv, wi)) wv = cand_v[j], wi = cand_i[j];
        }
        block_best(wv, wi, sv, si);
        for (int j = threadIdx.x; j < count; j += blockDim.x) {
          if (cand_i[j] == wi) cand_v[j] = kNegInf, cand_i[j] = INT_MAX;  // taken
        }
        __syncthreads();
      } else {
        for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
          const float x = row_value(row, i);
          if (better(prev_v, prev_i, x, i) && better(x, i, wv, wi)) wv = x, wi = i;
        }
        block_best(wv, wi, sv, si);
        prev_v = wv, prev_i = wi;
      }
      if (threadIdx.x == 0) {
        top_ids[r] = wi == INT_MAX ? -1 : wi;
        top_lps[r] = wi == INT_MAX ? kNegInf : (wv - m) - log_sum;
      }
    }
  }
  for (int r = (ntop > 0 ? ntop : 0) + threadIdx.x; r < kMaxTopLogprobs; r += blockDim.x) {
    top_ids[r] = -1;
    top_lps[r] = kNegInf;
  }
}

// Adds each row's (id, value) adjustments to its work row.
__global__ void adjust_kernel(DeviceBatch d) {
  const int b = blockIdx.x;
  if (!row_has_adjustments(d, b)) return;  // such a row always needs work, so it was copied
  float* wrow = d.work + static_cast<int64_t>(b) * d.work_stride;
  const int32_t end = d.adjust.offsets[b + 1];
  for (int32_t j = d.adjust.offsets[b] + threadIdx.x; j < end; j += blockDim.x) {
    const int32_t id = d.adjust.ids[j];
    if (id >= 0 && id < d.vocab) atomicAdd(wrow + id, d.adjust.values[j]);
  }
}

// Hash table of row b: slots [2 * offsets[b], 2 * offsets[b+1]) (twice the row's history, so it
// never fills), open addressing with linear probing. Inserts each history id once and counts its
// output occurrences.
__global__ void penalty_insert_kernel(DeviceBatch d) {
  const int b = blockIdx.x;
  if (!penalties_active(d.params[b]) || !row_has_history(d, b)) return;
  const int64_t begin = d.history.offsets[b], end = d.history.offsets[b + 1];
  const int64_t out_begin = d.history.output_begin[b];
  const uint64_t cap = static_cast<uint64_t>(2 * (end - begin));
  int32_t* keys = d.hash_keys + 2 * begin;
  int32_t* counts = d.hash_counts + 2 * begin;
  for (int64_t j = begin + static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; j < end;
       j += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const int32_t id = d.history.ids[j];
    if (id < 0 || id >= d.vocab) continue;
    uint64_t h = (static_cast<uint64_t>(static_cast<uint32_t>(id)) * 2654435761ull) % cap;
    while (true) {
      const int32_t prev = atomicCAS(keys + h, -1, id);
      if (prev == -1 || prev == id) break;
      h = h + 1 == cap ? 0 : h + 1;
    }
    if (j >= out_begin) atomicAdd(counts + h, 1);
  }
}

// Applies the penalties once per distinct id (each id sits in exactly one slot).
__global__ void penalty_apply_kernel(DeviceBatch d) {
  const int b = blockIdx.x;
  const SamplingRowParams p = d.params[b];
  if (!penalties_active(p) || !row_has_history(d, b)) return;
  const int64_t begin = d.history.offsets[b], end = d.history.offsets[b + 1];
  const int64_t cap = 2 * (end - begin);
  const int32_t* keys = d.hash_keys + 2 * begin;
  const int32_t* counts = d.hash_counts + 2 * begin;
  float* wrow = d.work + static_cast<int64_t>(b) * d.work_stride;
  for (int64_t slot = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; slot < cap;
       slot += static_cast<int64_t>(gridDim.y) * blockDim.x) {
    const int32_t id = keys[slot];
    if (id < 0) continue;
    const int32_t c = counts[slot];
    float x = wrow[id];
    x = x > 0.0f ? x / p.repetition_penalty : x * p.repetition_penalty;  // identity when r == 1
    if (c > 0) {
      x -= p.frequency_penalty * static_cast<float>(c);
      x -= p.presence_penalty;
    }
    wrow[id] = x;
  }
}

template <typename T>
core::Status launch_raw(const SamplingBatch& batch, int64_t row_stride, const DeviceBatch& d,
                        const SamplingOutputs& out, cudaStream_t stream) {
  constexpr int kV = Vec16<T>::kVec;
  const T* logits = static_cast<const T*>(batch.logits);
  if (batch.vocab % kV == 0 && row_stride % kV == 0 && aligned16(batch.logits)) {
    raw_pass_kernel<T, kV><<<batch.rows, kRawThreads, 0, stream>>>(logits, row_stride, d, out);
  } else {
    raw_pass_kernel<T, 1><<<batch.rows, kRawThreads, 0, stream>>>(logits, row_stride, d, out);
  }
  LOOM_CUDA_TRY_LAUNCH("raw_pass_kernel");
  return {};
}

}  // namespace

size_t sampling_workspace_bytes(int32_t rows, int32_t vocab, int64_t history_tokens) {
  if (rows <= 0 || vocab <= 0) return 0;
  const size_t r = static_cast<size_t>(rows);
  const size_t h = history_tokens > 0 ? static_cast<size_t>(history_tokens) : 0;
  return align256(r * sizeof(RawStats)) +
         align256(r * static_cast<size_t>(work_stride_for(vocab)) * sizeof(float)) +
         2 * align256(2 * h * sizeof(int32_t));
}

core::Status sample(const SamplingBatch& batch, const SamplingOutputs& out, void* workspace,
                    size_t workspace_bytes, cudaStream_t stream) {
  if (batch.rows < 0 || batch.vocab <= 0) {
    return core::invalid_argument("sample: bad shape rows=" + std::to_string(batch.rows) +
                                  " vocab=" + std::to_string(batch.vocab));
  }
  const int64_t row_stride = batch.row_stride == 0 ? batch.vocab : batch.row_stride;
  if (row_stride < batch.vocab) return core::invalid_argument("sample: row_stride < vocab");
  if (batch.rows == 0) return {};
  if (batch.logits == nullptr || batch.params == nullptr || batch.uniforms == nullptr) {
    return core::invalid_argument("sample: null logits, params or uniforms");
  }
  if (out.tokens == nullptr || out.logprobs == nullptr || out.top_ids == nullptr ||
      out.top_logprobs == nullptr) {
    return core::invalid_argument("sample: null output array");
  }
  const bool has_history = batch.history.total_tokens > 0 && batch.history.ids != nullptr;
  const bool has_adjust = batch.adjustments.total > 0 && batch.adjustments.ids != nullptr;
  if (has_history && (batch.history.offsets == nullptr || batch.history.output_begin == nullptr)) {
    return core::invalid_argument("sample: history without offsets / output_begin");
  }
  if (has_adjust && (batch.adjustments.offsets == nullptr || batch.adjustments.values == nullptr)) {
    return core::invalid_argument("sample: adjustments without offsets / values");
  }
  const int64_t history_tokens = has_history ? batch.history.total_tokens : 0;
  const size_t need = sampling_workspace_bytes(batch.rows, batch.vocab, history_tokens);
  if (workspace == nullptr || workspace_bytes < need) {
    return core::invalid_argument("sample: workspace of " + std::to_string(workspace_bytes) +
                                  " bytes, need " + std::to_string(need) + " for " +
                                  std::to_string(batch.rows) + " x " + std::to_string(batch.vocab) +
                                  " with " + std::to_string(history_tokens) + " history tokens");
  }
  if (!aligned16(workspace)) return core::invalid_argument("sample: workspace must be 16-byte aligned");

  char* ws = static_cast<char*>(workspace);
  DeviceBatch d{};
  d.params = batch.params;
  d.uniforms = batch.uniforms;
  d.rows = batch.rows;
  d.vocab = batch.vocab;
  d.work_stride = work_stride_for(batch.vocab);
  d.stats = reinterpret_cast<RawStats*>(ws);
  ws += align256(static_cast<size_t>(batch.rows) * sizeof(RawStats));
  d.work = reinterpret_cast<float*>(ws);
  ws += align256(static_cast<size_t>(batch.rows) * static_cast<size_t>(d.work_stride) * sizeof(float));
  d.hash_keys = reinterpret_cast<int32_t*>(ws);
  ws += align256(2 * static_cast<size_t>(history_tokens) * sizeof(int32_t));
  d.hash_counts = reinterpret_cast<int32_t*>(ws);
  if (has_history) d.history = batch.history;
  if (has_adjust) d.adjust = batch.adjustments;

  // 1. Raw statistics, raw top logprobs, plain-greedy tokens, copies of the rows to process.
  switch (batch.logits_dtype) {
    case core::DType::kF32: LOOM_RETURN_IF_ERROR(launch_raw<float>(batch, row_stride, d, out, stream)); break;
    case core::DType::kBF16:
      LOOM_RETURN_IF_ERROR(launch_raw<__nv_bfloat16>(batch, row_stride, d, out, stream));
      break;
    case core::DType::kF16:
      LOOM_RETURN_IF_ERROR(launch_raw<__half>(batch, row_stride, d, out, stream));
      break;
    default:
      return core::invalid_argument("sample: logits must be f32, bf16 or f16, got " +
                                    std::string(core::dtype_name(batch.logits_dtype)));
  }
  // 2. Logit bias / min_tokens masks.
  if (has_adjust) {
    adjust_kernel<<<batch.rows, kAdjustThreads, 0, stream>>>(d);
    LOOM_CUDA_TRY_LAUNCH("adjust_kernel");
  }
  // 3. Repetition / frequency / presence penalties over distinct history ids.
  if (has_history) {
    const size_t table = 2 * static_cast<size_t>(history_tokens) * sizeof(int32_t);
    LOOM_CUDA_TRY(cudaMemsetAsync(d.hash_keys, 0xff, table, stream));  // -1: empty
    LOOM_CUDA_TRY(cudaMemsetAsync(d.hash_counts, 0, table, stream));
    const int64_t per_row = (2 * history_tokens + batch.rows - 1) / batch.rows;
    int chunks = static_cast<int>((per_row + kPenaltyThreads - 1) / kPenaltyThreads);
    chunks = chunks < 1 ? 1 : (chunks > 64 ? 64 : chunks);
    const dim3 grid(static_cast<unsigned>(batch.rows), static_cast<unsigned>(chunks));
    penalty_insert_kernel<<<grid, kPenaltyThreads, 0, stream>>>(d);
    LOOM_CUDA_TRY_LAUNCH("penalty_insert_kernel");
    penalty_apply_kernel<<<grid, kPenaltyThreads, 0, stream>>>(d);
    LOOM_CUDA_TRY_LAUNCH("penalty_apply_kernel");
  }
  // 4. Filters and the draw (or the argmax) for the rows that need it.
  return launch_select(d, batch, out, stream);
}

}  // namespace loom::backends::cuda
