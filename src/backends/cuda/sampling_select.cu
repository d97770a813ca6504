// GPU sampler, part 2: for each row that needs processing (see row_needs_work), the greedy argmax
// of the adjusted/penalised logits, or temperature -> min_p -> top_k -> top_p -> the draw.
//
// One block of 512 threads per row, working in place on the row's f32 copy (`work`). Selections
// (the k-th largest logit, the top-p crossing) are 4-pass radix selects over an order-preserving
// 32-bit key of the logit, 8 bits per pass, with per-warp histograms in shared memory: counts for
// top_k, probability mass (double) for top_p. Within a warp, lanes with the same digit are summed
// by one leader in lane order, and warps are combined in warp order, so the sums, and with them
// the decisions, are deterministic run to run. The draw scans the kept tokens in id order
// (tiles of 2048 ids, block-wide exclusive scan in double) for the first running sum > u * total.
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/sampling_common.cuh"

namespace loom::backends::cuda::detail {

namespace {

constexpr int kSelectThreads = 512;
constexpr int kSelectWarps = kSelectThreads / 32;
constexpr int kScanItems = 16;
constexpr int kUnroll = 8;  // loads in flight per thread in the passes over a row

struct SelectShared {
  double hist[kSelectWarps][256];  // per-warp histograms
  double lane_val[kSelectWarps][32];
  double bucket[256];  // the warps' histograms combined
  double red_d[32];
  float red_f[32];
  int32_t red_i[32];
  uint32_t sel_digit;
  int32_t sel_found;
  double sel_above;
};

// Logit `i` of a row in the caller's dtype (0 f32, 1 bf16, 2 f16).
__device__ __forceinline__ float load_logit(const void* row, int code, int64_t i) {
  if (code == 0) return static_cast<const float*>(row)[i];
  if (code == 1) return __bfloat162float(static_cast<const __nv_bfloat16*>(row)[i]);
  return __half2float(static_cast<const __half*>(row)[i]);
}

// Calls f(x, i) with x = w[i] for every i < n of this thread (i == threadIdx.x mod blockDim.x),
// in increasing i. Loads kUnroll elements before using them: a block streams a whole row from
// L2, so it needs many loads in flight. f may write w[i] (only its own element).
template <typename F>
__device__ __forceinline__ void for_each_elem(float* w, int n, F f) {
  const int step = blockDim.x;
  for (int i0 = threadIdx.x; i0 < n; i0 += step * kUnroll) {
    float x[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) x[u] = i0 + u * step < n ? w[i0 + u * step] : 0.0f;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (i0 + u * step < n) f(x[u], i0 + u * step);
    }
  }
}

// Radix select from the top. Each element i < n carries a weight: 1 (mass = false: counts, every
// element) or exp(w[i] - m) (mass = true: probability mass of the finite elements >= `floor`;
// the caller guarantees that those below cannot matter). Finds the largest key K such that the
// weight of elements with key >= K reaches `target`, i.e. the element (in decreasing order) at
// which the running weight first reaches the target. Returns false when the total weight stays
// below target. *above gets the weight of elements with key > K.
__device__ bool radix_select(const float* w, int n, bool mass, float m, float floor, double target,
                             SelectShared& sh, uint32_t* key_out, double* above_out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t prefix = 0, mask = 0;
  double above = 0.0;
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int j = threadIdx.x; j < kSelectWarps * 256; j += blockDim.x) (&sh.hist[0][0])[j] = 0.0;
    __syncthreads();
    const int step = blockDim.x;
    for (int i0 = threadIdx.x - lane; i0 < n; i0 += step * kUnroll) {  // warp-uniform bounds
      float xs[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) xs[u] = i0 + u * step + lane < n ? w[i0 + u * step + lane] : 0.0f;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (i0 + u * step >= n) break;  // uniform across the warp
        const int i = i0 + u * step + lane;
        int digit = -1;
        double val = 0.0;
        if (i < n) {
          const float x = xs[u];
          const uint32_t key = float_key(x);
          if ((key & mask) == prefix && (!mass || (x != kNegInf && x >= floor))) {
            digit = static_cast<int>((key >> shift) & 0xffu);
            if (mass) val = static_cast<double>(expf(x - m));
          }
        }
        const unsigned peers = __match_any_sync(0xffffffffu, digit);
        const bool leader = digit >= 0 && lane == __ffs(peers) - 1;
        if (!mass) {
          // Counts: the group's size. Leaders of one warp hold distinct digits: no conflict; the
          // barrier orders this update before another lane's update of the same bucket.
          if (leader) sh.hist[warp][digit] += static_cast<double>(__popc(peers));
          __syncwarp();
        } else {
          // Mass: the leader sums its group in lane order (deterministic).
          sh.lane_val[warp][lane] = val;
          __syncwarp();
          if (leader) {
            double sum = 0.0;
            for (unsigned p = peers; p != 0; p &= p - 1) sum += sh.lane_val[warp][__ffs(p) - 1];
            sh.hist[warp][digit] += sum;
          }
          __syncwarp();
        }
      }
    }
    __syncthreads();
    for (int dgt = threadIdx.x; dgt < 256; dgt += blockDim.x) {
      double s = 0.0;
      for (int wp = 0; wp < kSelectWarps; ++wp) s += sh.hist[wp][dgt];
      sh.bucket[dgt] = s;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      double cum = 0.0;
      int found = 0;
      for (int dgt = 255; dgt >= 0; --dgt) {
        if (above + cum + sh.bucket[dgt] >= target) {
          sh.sel_digit = static_cast<uint32_t>(dgt);
          found = 1;
          break;
        }
        cum += sh.bucket[dgt];
      }
      sh.sel_found = found;
      sh.sel_above = above + cum;
    }
    __syncthreads();
    if (!sh.sel_found) return false;  // uniform
    prefix |= sh.sel_digit << shift;
    mask |= 0xffu << shift;
    above = sh.sel_above;
    __syncthreads();  // sh.sel_* are rewritten in the next pass
  }
  *key_out = prefix;
  *above_out = above;
  return true;
}

// The smallest i < n with weight(i) > 0 at which the running sum of weight(0..i), in id order,
// exceeds `threshold`; -1 if it never does. Every thread gets the result.
template <typename Weight>
__device__ int32_t find_crossing(int n, double threshold, Weight weight, SelectShared& sh) {
  const int tile = blockDim.x * kScanItems;
  double base = 0.0;
  for (int t0 = 0; t0 < n; t0 += tile) {
    const int i0 = t0 + threadIdx.x * kScanItems;
    double vals[kScanItems];
    double local = 0.0;
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      vals[k] = i0 + k < n ? weight(i0 + k) : 0.0;
      local += vals[k];
    }
    double tile_total = 0.0;
    double acc = base + block_exclusive_scan(local, sh.red_d, tile_total);
    int32_t found = INT_MAX;
#pragma unroll
    for (int k = 0; k < kScanItems; ++k) {
      acc += vals[k];
      if (found == INT_MAX && vals[k] > 0.0 && acc > threshold) found = i0 + k;
    }
    found = block_min_int(found, sh.red_i);
    if (found != INT_MAX) return found;
    base += tile_total;
  }
  return -1;
}

// Non-greedy sampling of one row (in place on w). Returns the token, or -1 if nothing is left.
__device__ int32_t sample_row(float* w, int n, const SamplingRowParams& p, double u, SelectShared& sh) {
  // Temperature (vLLM raises it to >= 1e-2) and the max after it.
  const float t = fmaxf(p.temperature, 0.01f);
  const bool scale = t != 1.0f;
  float lmax = kNegInf;
  for_each_elem(w, n, [&](float x, int i) {
    if (scale) {
      x = x / t;
      w[i] = x;
    }
    lmax = fmaxf(lmax, x);
  });
  const float m = block_max(lmax, sh.red_f);
  if (m == kNegInf) return -1;

  // min_p in logit space: p_i < min_p * p_max  <=>  x_i - max < log(min_p).
  if (p.min_p > 0.0f) {
    const float log_min_p = logf(p.min_p);
    for_each_elem(w, n, [&](float x, int i) {
      if (x - m < log_min_p) w[i] = kNegInf;
    });
  }
  __syncthreads();

  // top_k: keep x >= the k-th largest value (all ties at it stay).
  if (p.top_k > 0 && p.top_k < n) {
    uint32_t kth_key = 0;
    double above = 0.0;
    if (radix_select(w, n, /*mass=*/false, m, kNegInf, static_cast<double>(p.top_k), sh, &kth_key, &above)) {
      const float kth = key_float(kth_key);
      for_each_elem(w, n, [&](float x, int i) {
        if (x < kth) w[i] = kNegInf;
      });
    }
    __syncthreads();
  }

  // Candidates: the finite logits, weights exp(x - m) (m is still the max: filters keep it).
  double total = 0.0;
  int cand = 0;
  for_each_elem(w, n, [&](float x, int) {
    if (x != kNegInf) {
      total += static_cast<double>(expf(x - m));
      ++cand;
    }
  });
  total = block_sum(total, sh.red_d);
  cand = static_cast<int>(block_sum(static_cast<double>(cand), sh.red_d));
  if (cand == 0) return -1;

  // top_p: kept = x > vc, or x == vc with id <= idc. Defaults keep every finite logit.
  float vc = kNegInf;
  int32_t idc = -1;
  if (p.top_p < 1.0f && cand > 1) {
    const double target = static_cast<double>(p.top_p) * total;
    // Tokens below `floor` hold at most n * exp(floor - m) = (1 - p) * total / e of the mass, so
    // the tokens above it already exceed the target: the cut lies above the floor and everything
    // below it is dropped whatever its order. Leaving them out of the radix passes is exact and,
    // for real logits (a few likely tokens, a long tail), skips most of the vocabulary.
    const double tail = (1.0 - static_cast<double>(p.top_p)) * total / static_cast<double>(n);
    const float floor = tail > 0.0 ? static_cast<float>(static_cast<double>(m) + log(tail) - 1.0) : kNegInf;
    uint32_t key = 0;
    double above = 0.0;
    if (radix_select(w, n, /*mass=*/true, m, floor, target, sh, &key, &above)) {
      vc = key_float(key);
      const double wc = static_cast<double>(expf(vc - m));
      double ties = 0.0;
      for_each_elem(w, n, [&](float x, int) { ties += x == vc ? 1.0 : 0.0; });
      ties = block_sum(ties, sh.red_d);
      // Ties at vc in id order: the j-th (from 0) stays while above + j * wc < target.
      double keep = wc > 0.0 ? ceil((target - above) / wc) : ties;
      keep = fmin(fmax(keep, 1.0), ties);
      const float vcc = vc;
      idc = find_crossing(
          n, keep - 0.5, [&](int i) { return w[i] == vcc ? 1.0 : 0.0; }, sh);
    }
  }

  // Mass of the kept tokens and the last of them (the fallback when rounding leaves the running
  // sum at or below the target, as on the CPU).
  double kept_total = 0.0;
  int32_t last = -1;
  for_each_elem(w, n, [&](float x, int i) {
    if (x > vc || (x == vc && i <= idc)) {
      kept_total += static_cast<double>(expf(x - m));
      last = i;
    }
  });
  kept_total = block_sum(kept_total, sh.red_d);
  last = block_max_int(last, sh.red_i);
  if (last < 0) return -1;

  const double target = u * kept_total;
  const int32_t token = find_crossing(
      n, target,
      [&](int i) {
        const float x = w[i];
        return (x > vc || (x == vc && i <= idc)) ? static_cast<double>(expf(x - m)) : 0.0;
      },
      sh);
  return token >= 0 ? token : last;
}

__global__ void __launch_bounds__(kSelectThreads, 1)
    select_kernel(const void* logits, int logits_code, int64_t row_stride, DeviceBatch d,
                  SamplingOutputs out) {
  __shared__ SelectShared sh;
  const int b = blockIdx.x;
  if (!row_needs_work(d, b)) return;  // uniform: the raw pass already sampled this row
  const SamplingRowParams p = d.params[b];
  float* w = d.work + static_cast<int64_t>(b) * d.work_stride;
  const int n = d.vocab;
  int32_t token;
  if (p.greedy) {
    float best_v = kNegInf;
    int32_t best_i = INT_MAX;
    for_each_elem(w, n, [&](float x, int i) {
      if (x > best_v) best_v = x, best_i = i;
    });
    block_best(best_v, best_i, sh.red_f, sh.red_i);
    token = best_i == INT_MAX ? -1 : best_i;
  } else {
    token = sample_row(w, n, p, d.uniforms[b], sh);
  }
  if (threadIdx.x == 0) {
    out.tokens[b] = token;
    if (p.num_logprobs >= 0) {
      const RawStats st = d.stats[b];
      const void* row = static_cast<const char*>(logits) +
                        static_cast<int64_t>(b) * row_stride * (logits_code == 0 ? 4 : 2);
      out.logprobs[b] = token >= 0 ? (load_logit(row, logits_code, token) - st.max) - st.log_sum : kNegInf;
    }
  }
}

}  // namespace

core::Status launch_select(const DeviceBatch& d, const SamplingBatch& batch, const SamplingOutputs& out,
                           cudaStream_t stream) {
  const int code =
      batch.logits_dtype == core::DType::kF32 ? 0 : (batch.logits_dtype == core::DType::kBF16 ? 1 : 2);
  const int64_t row_stride = batch.row_stride == 0 ? batch.vocab : batch.row_stride;
  select_kernel<<<batch.rows, kSelectThreads, 0, stream>>>(batch.logits, code, row_stride, d, out);
  LOOM_CUDA_TRY_LAUNCH("select_kernel");
  return {};
}

}  // namespace loom::backends::cuda::detail
