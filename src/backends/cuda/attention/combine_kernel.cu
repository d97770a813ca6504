// Merges the per-split partial results of a split context: for each (token, q head),
//   out = sum_j w_j o_j / sum_j w_j,  w_j = exp2(lse_j - max_j lse_j),
// over the splits that exist for the token's sequence (valid_splits; later ones were never
// written). One CTA of 8 warps per (token, head): warp w takes splits w, w + 8, ... (so a
// 128-split decode keeps 8 x 4 loads in flight instead of walking the splits serially), lane l
// owns columns 4l .. 4l + 3 (head_dim <= 128), and the warps' sums meet in shared memory.
#include <cmath>

#include "backends/cuda/attention/attention_internal.cuh"

namespace loom::backends::cuda::attention_detail {
namespace {

constexpr int kCombineWarps = 8;

template <typename T>
__global__ void __launch_bounds__(kCombineWarps * 32) combine_kernel(const KernelArgs a, int head_dim) {
  __shared__ float red_max[kCombineWarps];
  __shared__ float4 red_acc[kCombineWarps][32];
  __shared__ float red_sum[kCombineWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t pair = blockIdx.x;  // token * q_heads + head
  const int token = static_cast<int>(pair / a.q_heads);

  // The sequence owning `token`: the largest s with q_indptr[s] <= token (empty sequences
  // share their successor's start, so the largest one is the non-empty owner).
  int lo = 0, hi = a.num_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (a.q_indptr[mid] <= token)
      lo = mid;
    else
      hi = mid - 1;
  }
  const int q_len = a.q_indptr[lo + 1] - a.q_indptr[lo];
  const int kv_len = a.kv_lens[lo];
  const int nvalid = valid_splits(kv_len - visible_lo(kv_len, q_len, a.window), a.num_splits);

  const int64_t split_stride = int64_t{a.num_tokens} * a.q_heads;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < nvalid; j += kCombineWarps * 32)
    mx = fmaxf(mx, a.ws_lse[j * split_stride + pair]);
  mx = warp_max(mx);
  if (lane == 0) red_max[warp] = mx;
  __syncthreads();
  mx = red_max[0];
#pragma unroll
  for (int w = 1; w < kCombineWarps; ++w) mx = fmaxf(mx, red_max[w]);

  // Every valid split wrote finite o (zeros where it saw no key, with lse = -inf -> w = 0).
  const int d = lane * 4;
  const bool active = d < head_dim;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float wsum = 0.0f;
#pragma unroll 4
  for (int j = warp; j < nvalid; j += kCombineWarps) {
    const float lse = a.ws_lse[j * split_stride + pair];
    const float w = lse == -INFINITY ? 0.0f : fast_exp2(lse - mx);
    wsum += w;
    if (active) {
      const float4 v = *reinterpret_cast<const float4*>(a.ws_o + (j * split_stride + pair) * head_dim + d);
      acc.x += w * v.x, acc.y += w * v.y, acc.z += w * v.z, acc.w += w * v.w;
    }
  }
  red_acc[warp][lane] = acc;
  if (lane == 0) red_sum[warp] = wsum;
  __syncthreads();
  if (warp != 0 || !active) return;
  float total = 0.0f;
  acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int w = 0; w < kCombineWarps; ++w) {
    total += red_sum[w];
    const float4 v = red_acc[w][lane];
    acc.x += v.x, acc.y += v.y, acc.z += v.z, acc.w += v.w;
  }
  const float inv = total > 0.0f ? 1.0f / total : 0.0f;
  uint2 packed;
  packed.x = Pair<T>::from_floats(acc.x * inv, acc.y * inv);
  packed.y = Pair<T>::from_floats(acc.z * inv, acc.w * inv);
  *reinterpret_cast<uint2*>(static_cast<T*>(a.out) + pair * head_dim + d) = packed;
}

template <typename T>
cudaError_t launch_combine_t(const KernelArgs& a, int head_dim, cudaStream_t stream) {
  const int64_t blocks = int64_t{a.num_tokens} * a.q_heads;
  if (blocks > 0x7fffffff) return cudaErrorInvalidConfiguration;
  combine_kernel<T><<<static_cast<unsigned>(blocks), kCombineWarps * 32, 0, stream>>>(a, head_dim);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_combine(const KernelArgs& a, bool bf16, int head_dim, cudaStream_t stream) {
  return bf16 ? launch_combine_t<__nv_bfloat16>(a, head_dim, stream)
              : launch_combine_t<__half>(a, head_dim, stream);
}

}  // namespace loom::backends::cuda::attention_detail
