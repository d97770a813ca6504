// FlashAttention-2 style paged attention on tensor cores (mma.sync m16n8k16, f32
// accumulators) for prefill, chunked prefill and mixed batches.
//
// GQA packing: the rows of a CTA are (token, head-in-group) pairs of one kv head, row
// r -> token r / group, q head kv_head * group + r % group, so each K/V tile is read once per
// kv head and decode rows of a mixed batch fill a tile together with their group.
// One CTA (4 warps, 16 rows each) per (64-row tile, kv head, sequence x split):
//   Q tile -> shared (cp.async, zero rows past the sequence) -> A fragments (ldmatrix) once;
//   K/V tiles of 64 keys gathered through the block table into a 2-stage cp.async pipeline,
//   keys past the CTA's key range zero-filled;
//   S = Q K^T (ldmatrix K), scaled into the exp2 domain, masked only on tiles that cross a
//   boundary (range end, causal diagonal, window start), f32 online softmax per row in
//   registers, P rounded to the storage type and fed back as the A operand of P V
//   (ldmatrix.trans V).
// Causal and sliding-window limits clip each CTA's key range, so fully masked tiles are never
// loaded. With one split the normalised rows go to out; otherwise (o, lse) go to the
// workspace for the combine kernel.
#include <climits>
#include <cmath>

#include "backends/cuda/attention/attention_internal.cuh"

namespace loom::backends::cuda::attention_detail {
namespace {

template <typename T, int HD>
struct PrefillShape {
  static constexpr int kKSteps = HD / 16;  // k-steps of Q K^T
  static constexpr int kDBlocks = HD / 8;  // n-blocks of the output (8 columns each)
  static constexpr int kStride = HD + 8;   // smem row stride (elements): +16 B keeps ldmatrix
                                           // row addresses on distinct banks
  static constexpr int kTileElems = kTileKeys * kStride;
  // K x 2 stages, V x 2 stages and the tiles' row offsets; the Q tile borrows K's second stage
  // until its fragments are in registers, so three CTAs fit on an SM (71 KB each at D = 128).
  static constexpr size_t kTileBytes = size_t{4} * kTileElems * sizeof(T);
  static constexpr size_t kBytes = kTileBytes + 2 * kTileKeys * sizeof(int64_t);
  static_assert(kTileBytes % 16 == 0, "row offsets stay aligned");
  static_assert(HD % 16 == 0 && kDBlocks % 2 == 0, "head_dim must be a multiple of 16");
  static_assert(kTileRows == kTileKeys, "Q and K/V tiles share the stride and size");
  static_assert(2 * kTileRows == kThreads, "a thread pair per Q row");
};

template <typename T, int HD>
__global__ void __launch_bounds__(kThreads, 3) prefill_kernel(const KernelArgs a) {
  using S = PrefillShape<T, HD>;
  constexpr int kKSteps = S::kKSteps, kDBlocks = S::kDBlocks;
  constexpr int kStride = S::kStride;
  constexpr int kNBlocks = kTileKeys / 8;  // n-blocks of S (8 keys each)

  extern __shared__ __align__(16) unsigned char smem[];
  T* ks = reinterpret_cast<T*>(smem);  // [2][64 keys][kStride]
  T* vs = ks + 2 * S::kTileElems;      // [2][64 keys][kStride]
  T* qs = ks + S::kTileElems;          // [64 rows][kStride]: K stage 1 until tile 1 is issued
  int64_t* koff = reinterpret_cast<int64_t*>(smem + S::kTileBytes);  // [2][64] key row offsets

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gid = lane / 4, tig = lane % 4;  // mma group id / thread in group
  const int seq = blockIdx.z / a.num_splits, split = blockIdx.z % a.num_splits;
  const int kvh = blockIdx.y;
  const int G = a.group;

  const int q_begin = a.q_indptr[seq];
  const int q_len = a.q_indptr[seq + 1] - q_begin;
  if (q_len > a.max_q_len) __trap();  // grid too small for this sequence: caller bug
  const int rows = q_len * G;
  const int row0 = blockIdx.x * kTileRows;
  if (row0 >= rows) return;

  const int kv_len = a.kv_lens[seq];
  const int vis_lo = visible_lo(kv_len, q_len, a.window);
  const int vis_len = kv_len - vis_lo;
  const int chunk = split_chunk(vis_len, a.num_splits);
  if (split * chunk >= vis_len) return;  // past the end: combine ignores this split
  const int split_begin = vis_lo + split * chunk;
  const int split_end = min(split_begin + chunk, kv_len);

  // Key range of this CTA: the split, clipped by the rows' causal / window limits.
  const int first_qpos = kv_len - q_len;
  const int qpos_lo = first_qpos + row0 / G;
  const int qpos_hi = first_qpos + (min(row0 + kTileRows, rows) - 1) / G;
  int kbeg = split_begin, kend = split_end;
  if (a.causal) kend = min(kend, qpos_hi + 1);
  if (a.window > 0) kbeg = max(kbeg, qpos_lo - a.window + 1);
  const int n_tiles = kend > kbeg ? (kend - kbeg + kTileKeys - 1) / kTileKeys : 0;

  const T* q = static_cast<const T*>(a.q);
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const int32_t* table = a.block_table + int64_t{seq} * a.max_blocks_per_seq;

  // The two rows this thread holds in the mma fragments (gid and gid + 8 of its warp) and
  // their visible key intervals [lo, hi].
  int row_lo[2], row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = row0 + warp * 16 + gid + 8 * i;
    const int qpos = first_qpos + row / G;  // rows past `rows` get qpos past the end: harmless
    row_hi[i] = a.causal ? qpos : kv_len - 1;
    row_lo[i] = a.window > 0 ? qpos - a.window + 1 : INT_MIN;
  }
  // A tile needs element masks only where it crosses kend, a causal diagonal or a window start.
  const int tile_mask_hi = a.causal ? qpos_lo : INT_MAX;                     // min row_hi
  const int tile_mask_lo = a.window > 0 ? qpos_hi - a.window + 1 : INT_MIN;  // max row_lo

  float o[kDBlocks][4];
#pragma unroll
  for (int b = 0; b < kDBlocks; ++b) o[b][0] = o[b][1] = o[b][2] = o[b][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  if (n_tiles > 0) {
    // Q tile (rows past the sequence are zero): thread pair per row, alternate 16-byte chunks.
    {
      const int r = tid >> 1, half = tid & 1;
      const int row = row0 + r;
      const bool valid = row < rows;
      const T* src = q + half * 8;
      if (valid) src += ((int64_t{q_begin} + row / G) * a.q_heads + int64_t{kvh} * G + row % G) * HD;
#pragma unroll
      for (int c = 0; c < HD / 16; ++c)
        cp_async_16(qs + r * kStride + half * 8 + c * 16, src + c * 16, valid);
    }
    auto row_offset = [&](int t) {
      return kv_row_offset<HD>(table, a.block_size, a.kv_heads, kvh, kbeg + t * kTileKeys, kend);
    };
    auto issue_tile = [&](int t) {
      const int st = t & 1;
      issue_kv_tile<T, HD>(ks + st * S::kTileElems, vs + st * S::kTileElems, kStride, kc, vc,
                           koff + st * kTileKeys);
    };
    // Row offsets of tile t live in koff[t & 1]: written (threads < 64) before the barrier
    // that precedes the copy of tile t, so the table reads run a tile ahead of the copies.
    if (tid < kTileKeys) koff[tid] = row_offset(0);
    __syncthreads();
    issue_tile(0);
    cp_async_commit();  // group 0: Q and tile 0
    if (n_tiles > 1 && tid < kTileKeys) koff[kTileKeys + tid] = row_offset(1);

    uint32_t qf[kKSteps][4];
    for (int j = 0; j < n_tiles; ++j) {
      if (j == 0) {
        cp_async_wait<0>();
        __syncthreads();
        // A fragments of this warp's 16 Q rows: matrix i = (rows +8*(i%2), cols +8*(i/2)).
        const int mi = lane / 8;
        const T* base = qs + (warp * 16 + (mi % 2) * 8 + lane % 8) * kStride + (mi / 2) * 8;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) ldmatrix_x4(qf[kk], base + kk * 16);
        __syncthreads();  // every warp holds its Q fragments: tile 1 may overwrite qs
      }
      // Stage (j + 1) & 1 was last read in iteration j - 1, which ended with a barrier.
      if (j + 1 < n_tiles) issue_tile(j + 1);
      cp_async_commit();  // group j + 1
      int64_t next_off = -1;
      if (j + 2 < n_tiles) next_off = row_offset(j + 2);  // lands while tile j is computed
      if (j > 0) {
        cp_async_wait<1>();  // groups 0..j complete: tile j landed
        __syncthreads();
      }

      const int st = j & 1;
      const int kt = kbeg + j * kTileKeys;
      const T* kst = ks + st * S::kTileElems;
      const T* vst = vs + st * S::kTileElems;

      // S = Q K^T for 16 rows x 64 keys per warp.
      float s[kNBlocks][4];
#pragma unroll
      for (int nb = 0; nb < kNBlocks; ++nb) s[nb][0] = s[nb][1] = s[nb][2] = s[nb][3] = 0.0f;
      {
        // matrix i = (keys 8*(2*nb2 + i/2) .., dims 16*kk + 8*(i%2) ..).
        const int mi = lane / 8;
        const T* base = kst + ((mi / 2) * 8 + lane % 8) * kStride + (mi % 2) * 8;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
          for (int nb2 = 0; nb2 < kNBlocks / 2; ++nb2) {
            uint32_t b[4];
            ldmatrix_x4(b, base + nb2 * 16 * kStride + kk * 16);
            mma_16816<T>(s[2 * nb2], qf[kk], b[0], b[1]);
            mma_16816<T>(s[2 * nb2 + 1], qf[kk], b[2], b[3]);
          }
        }
      }

      const bool need_mask = kt + kTileKeys > kend || kt + kTileKeys - 1 > tile_mask_hi || kt < tile_mask_lo;
      if (need_mask) {
#pragma unroll
        for (int nb = 0; nb < kNBlocks; ++nb) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int kpos = kt + nb * 8 + 2 * tig + (e & 1);
            const int i = e >> 1;
            if (kpos >= kend || kpos > row_hi[i] || kpos < row_lo[i]) s[nb][e] = -INFINITY;
          }
        }
      }
      online_softmax(s, m, l, o, a.scale_log2);

      // O += P V: k-step jk covers keys 16 jk .. 16 jk + 15.
      {
        // matrix i = (keys 16*jk + 8*(i%2) .., dims 8*(2*db2 + i/2) ..), transposed.
        const int mi = lane / 8;
        const T* base = vst + ((mi % 2) * 8 + lane % 8) * kStride + (mi / 2) * 8;
#pragma unroll
        for (int jk = 0; jk < kTileKeys / 16; ++jk) {
          const uint32_t pa[4] = {Pair<T>::from_floats(s[2 * jk][0], s[2 * jk][1]),
                                  Pair<T>::from_floats(s[2 * jk][2], s[2 * jk][3]),
                                  Pair<T>::from_floats(s[2 * jk + 1][0], s[2 * jk + 1][1]),
                                  Pair<T>::from_floats(s[2 * jk + 1][2], s[2 * jk + 1][3])};
#pragma unroll
          for (int db2 = 0; db2 < kDBlocks / 2; ++db2) {
            uint32_t b[4];
            ldmatrix_x4_trans(b, base + jk * 16 * kStride + db2 * 16);
            mma_16816<T>(o[2 * db2], pa, b[0], b[1]);
            mma_16816<T>(o[2 * db2 + 1], pa, b[2], b[3]);
          }
        }
      }
      // koff[j & 1] was last read by the copy of tile j (iteration j - 1), before this
      // iteration's barrier.
      if (j + 2 < n_tiles && tid < kTileKeys) koff[(j & 1) * kTileKeys + tid] = next_off;
      __syncthreads();  // stage st is free for the prefetch of tile j + 2; koff visible
    }
    cp_async_wait<0>();
  }

  // Epilogue: rows gid and gid + 8 of this warp.
  const bool split_mode = a.num_splits > 1;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float lsum = l[i];
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
    const int row = row0 + warp * 16 + gid + 8 * i;
    if (row >= rows) continue;
    const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    const int64_t out_row = (int64_t{q_begin} + row / G) * a.q_heads + int64_t{kvh} * G + row % G;
    if (split_mode) {
      float* dst = a.ws_o + (int64_t{split} * a.num_tokens * a.q_heads + out_row) * HD + 2 * tig;
#pragma unroll
      for (int b = 0; b < kDBlocks; ++b)
        *reinterpret_cast<float2*>(dst + b * 8) = make_float2(o[b][2 * i] * inv, o[b][2 * i + 1] * inv);
      if (tig == 0)
        a.ws_lse[int64_t{split} * a.num_tokens * a.q_heads + out_row] =
            lsum > 0.0f ? m[i] * a.scale_log2 + log2f(lsum) : -INFINITY;
    } else {
      uint32_t* dst = reinterpret_cast<uint32_t*>(static_cast<T*>(a.out) + out_row * HD + 2 * tig);
#pragma unroll
      for (int b = 0; b < kDBlocks; ++b)
        dst[b * 4] = Pair<T>::from_floats(o[b][2 * i] * inv, o[b][2 * i + 1] * inv);
    }
  }
}

template <typename T, int HD>
cudaError_t launch_prefill_t(const KernelArgs& a, int row_tiles, cudaStream_t stream) {
  using S = PrefillShape<T, HD>;
  const void* fn = reinterpret_cast<const void*>(&prefill_kernel<T, HD>);
  const cudaError_t e = ensure_smem_limit(fn, static_cast<int>(S::kBytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(row_tiles, a.kv_heads, a.num_seqs * a.num_splits);
  prefill_kernel<T, HD><<<grid, kThreads, S::kBytes, stream>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_prefill_dim(const KernelArgs& a, int head_dim, int row_tiles, cudaStream_t stream) {
  switch (head_dim) {
    case 64: return launch_prefill_t<T, 64>(a, row_tiles, stream);
    case 80: return launch_prefill_t<T, 80>(a, row_tiles, stream);
    case 128: return launch_prefill_t<T, 128>(a, row_tiles, stream);
    default: return cudaErrorInvalidValue;  // rejected earlier with a Status
  }
}

}  // namespace

cudaError_t launch_prefill(const KernelArgs& a, bool bf16, int head_dim, int row_tiles, cudaStream_t stream) {
  return bf16 ? launch_prefill_dim<__nv_bfloat16>(a, head_dim, row_tiles, stream)
              : launch_prefill_dim<__half>(a, head_dim, row_tiles, stream);
}

}  // namespace loom::backends::cuda::attention_detail
