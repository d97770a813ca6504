// Split-K ("flash-decoding") paged attention for decode steps: few query rows per sequence
// (max_q_len * group <= kDecodeRows, or max_q_len == 1), long contexts. Memory-bound: each
// K/V byte is read once per kv head and the grid is sized to keep every SM busy.
//
// GQA packing as in the prefill kernel: rows are (token, head-in-group) pairs of one kv head,
// so the queries of a whole GQA group (up to 16 rows) share every K/V tile. One CTA (4 warps)
// per (split, kv head x 16-row chunk, sequence) walks its slice of the context in tiles of 64
// keys, gathered through the block table with 16-byte cp.async loads into a 3-stage pipeline
// (keys past the range are zero-filled). Each warp owns 16 keys of every tile and keeps its
// own f32 online softmax over them (S = Q K^T and P V on tensor cores, mma.sync m16n8k16); the
// four warps' (m, l, O) are merged through shared memory at the end. With one split the
// normalised rows go to out; otherwise (o, lse) go to the workspace for the combine kernel.
#include <climits>
#include <cmath>

#include "backends/cuda/attention/attention_internal.cuh"

namespace loom::backends::cuda::attention_detail {
namespace {

constexpr int kWarps = kThreads / 32;

template <typename T, int HD>
struct DecodeShape {
  static constexpr int kChunks = HD / 8;   // 16-byte chunks per row
  static constexpr int kKSteps = HD / 16;  // k-steps of Q K^T
  static constexpr int kDBlocks = HD / 8;  // n-blocks of the output (8 columns each)
  static constexpr int kStride = HD + 8;   // smem row stride (elements), +16 B against bank conflicts
  static constexpr int kStages = 3;
  static constexpr int kTileElems = kTileKeys * kStride;
  static constexpr size_t kQBytes = size_t{kDecodeRows} * kStride * sizeof(T);
  static constexpr size_t kTileBytes = kQBytes + size_t{2} * kStages * kTileElems * sizeof(T);
  static constexpr size_t kBytes =
      kTileBytes + size_t{kStages} * kTileKeys * sizeof(int64_t);  // + row offsets
  // After the loop: per-warp O [kWarps][16][HD], m and l [kWarps][16] (aliases Q and stages).
  static constexpr size_t kMergeBytes = sizeof(float) * (size_t{kWarps} * kDecodeRows * (HD + 2));
  static_assert(HD % 16 == 0 && kDBlocks % 2 == 0, "head_dim must be a multiple of 16");
  static_assert(kTileKeys == 16 * kWarps, "each warp owns 16 keys of a tile");
  static_assert(kMergeBytes <= kTileBytes, "merge buffer aliases Q and the tiles");
  static_assert(kTileBytes % 16 == 0, "row offsets stay aligned");
  static_assert(kQBytes % 16 == 0, "stages stay 16-byte aligned");
};

template <typename T, int HD>
__global__ void __launch_bounds__(kThreads) decode_kernel(const KernelArgs a) {
  using S = DecodeShape<T, HD>;
  constexpr int kChunks = S::kChunks, kKSteps = S::kKSteps, kDBlocks = S::kDBlocks;
  constexpr int kStride = S::kStride, kStages = S::kStages;

  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);                                // [16 rows][kStride]
  T* ks = reinterpret_cast<T*>(smem + S::kQBytes);                   // [kStages][64 keys][kStride]
  T* vs = ks + kStages * S::kTileElems;                              // [kStages][64 keys][kStride]
  int64_t* koff = reinterpret_cast<int64_t*>(smem + S::kTileBytes);  // [kStages][64] key row offsets

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int gid = lane / 4, tig = lane % 4;
  const int split = blockIdx.x, seq = blockIdx.z;
  const int kvh = blockIdx.y / a.head_chunks, chunk_idx = blockIdx.y % a.head_chunks;
  const int G = a.group;

  const int q_begin = a.q_indptr[seq];
  const int q_len = a.q_indptr[seq + 1] - q_begin;
  if (q_len > a.max_q_len) __trap();  // grid too small for this sequence: caller bug
  const int rows = q_len * G;
  const int row0 = chunk_idx * kDecodeRows;
  if (row0 >= rows) return;

  const int kv_len = a.kv_lens[seq];
  const int vis_lo = visible_lo(kv_len, q_len, a.window);
  const int vis_len = kv_len - vis_lo;
  const int chunk = split_chunk(vis_len, a.num_splits);
  if (split * chunk >= vis_len) return;  // past the end: combine ignores this split
  const int split_begin = vis_lo + split * chunk;
  const int split_end = min(split_begin + chunk, kv_len);

  const int first_qpos = kv_len - q_len;
  const int qpos_lo = first_qpos + row0 / G;
  const int qpos_hi = first_qpos + (min(row0 + kDecodeRows, rows) - 1) / G;
  int kbeg = split_begin, kend = split_end;
  if (a.causal) kend = min(kend, qpos_hi + 1);
  if (a.window > 0) kbeg = max(kbeg, qpos_lo - a.window + 1);
  const int n_tiles = kend > kbeg ? (kend - kbeg + kTileKeys - 1) / kTileKeys : 0;

  const T* q = static_cast<const T*>(a.q);
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const int32_t* table = a.block_table + int64_t{seq} * a.max_blocks_per_seq;

  // Rows gid and gid + 8 of the chunk and their visible key intervals [lo, hi].
  int row_lo[2], row_hi[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int qpos = first_qpos + (row0 + gid + 8 * i) / G;  // padding rows: past the end, harmless
    row_hi[i] = a.causal ? qpos : kv_len - 1;
    row_lo[i] = a.window > 0 ? qpos - a.window + 1 : INT_MIN;
  }
  const int tile_mask_hi = a.causal ? qpos_lo : INT_MAX;                     // min row_hi
  const int tile_mask_lo = a.window > 0 ? qpos_hi - a.window + 1 : INT_MIN;  // max row_lo

  float o[kDBlocks][4];
#pragma unroll
  for (int b = 0; b < kDBlocks; ++b) o[b][0] = o[b][1] = o[b][2] = o[b][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};

  if (n_tiles > 0) {
    for (int c = tid; c < kDecodeRows * kChunks; c += kThreads) {
      const int r = c / kChunks, ch = c % kChunks;
      const int row = row0 + r;
      const bool valid = row < rows;
      const T* src = q;
      if (valid)
        src = q + ((int64_t{q_begin} + row / G) * a.q_heads + int64_t{kvh} * G + row % G) * HD + ch * 8;
      cp_async_16(qs + r * kStride + ch * 8, src, valid);
    }
    auto row_offset = [&](int t) {
      return kv_row_offset<HD>(table, a.block_size, a.kv_heads, kvh, kbeg + t * kTileKeys, kend);
    };
    auto issue_tile = [&](int t) {
      const int st = t % kStages;
      issue_kv_tile<T, HD>(ks + st * S::kTileElems, vs + st * S::kTileElems, kStride, kc, vc,
                           koff + st * kTileKeys);
    };
    // Row offsets of tile t live in koff[t % kStages]: written (threads < 64) before the
    // barrier that precedes the copy of tile t, loaded into a register one iteration earlier.
#pragma unroll
    for (int t = 0; t < kStages - 1; ++t)
      if (t < n_tiles && tid < kTileKeys) koff[t * kTileKeys + tid] = row_offset(t);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kStages - 1; ++t) {
      if (t < n_tiles) issue_tile(t);
      cp_async_commit();  // group t (group 0 also holds Q)
    }
    int64_t next_off = kStages - 1 < n_tiles ? row_offset(kStages - 1) : -1;

    uint32_t qf[kKSteps][4];
    const int mi = lane / 8;
    for (int j = 0; j < n_tiles; ++j) {
      const int t_next = j + kStages - 1;
      // koff[t_next % kStages] last held tile j - 1, copied in iteration j - kStages (or the
      // prologue): every thread has since passed iteration j - 1's barrier.
      if (t_next < n_tiles && tid < kTileKeys) koff[(t_next % kStages) * kTileKeys + tid] = next_off;
      cp_async_wait<kStages - 2>();  // groups 0..j complete: tile j landed
      __syncthreads();               // ... for every thread; every warp is done with tile j - 1
      if (t_next < n_tiles) issue_tile(t_next);
      cp_async_commit();
      if (j + kStages < n_tiles) next_off = row_offset(j + kStages);

      if (j == 0) {
        const T* base = qs + ((mi % 2) * 8 + lane % 8) * kStride + (mi / 2) * 8;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) ldmatrix_x4(qf[kk], base + kk * 16);
      }

      const int st = j % kStages;
      const int kt = kbeg + j * kTileKeys;
      const int wk = warp * 16;  // this warp's keys within the tile
      const T* kst = ks + st * S::kTileElems;
      const T* vst = vs + st * S::kTileElems;

      float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
      {
        // matrix i = (keys wk + 8*(i/2) .., dims 16*kk + 8*(i%2) ..).
        const T* base = kst + (wk + (mi / 2) * 8 + lane % 8) * kStride + (mi % 2) * 8;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          uint32_t b[4];
          ldmatrix_x4(b, base + kk * 16);
          mma_16816<T>(s[0], qf[kk], b[0], b[1]);
          mma_16816<T>(s[1], qf[kk], b[2], b[3]);
        }
      }

      const bool need_mask = kt + kTileKeys > kend || kt + kTileKeys - 1 > tile_mask_hi || kt < tile_mask_lo;
      if (need_mask) {
#pragma unroll
        for (int nb = 0; nb < 2; ++nb) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int kpos = kt + wk + nb * 8 + 2 * tig + (e & 1);
            const int i = e >> 1;
            if (kpos >= kend || kpos > row_hi[i] || kpos < row_lo[i]) s[nb][e] = -INFINITY;
          }
        }
      }
      online_softmax(s, m, l, o, a.scale_log2);

      {
        const uint32_t pa[4] = {
            Pair<T>::from_floats(s[0][0], s[0][1]), Pair<T>::from_floats(s[0][2], s[0][3]),
            Pair<T>::from_floats(s[1][0], s[1][1]), Pair<T>::from_floats(s[1][2], s[1][3])};
        // matrix i = (keys wk + 8*(i%2) .., dims 8*(2*db2 + i/2) ..), transposed.
        const T* base = vst + (wk + (mi % 2) * 8 + lane % 8) * kStride + (mi / 2) * 8;
#pragma unroll
        for (int db2 = 0; db2 < kDBlocks / 2; ++db2) {
          uint32_t b[4];
          ldmatrix_x4_trans(b, base + db2 * 16);
          mma_16816<T>(o[2 * db2], pa, b[0], b[1]);
          mma_16816<T>(o[2 * db2 + 1], pa, b[2], b[3]);
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // the merge buffer below aliases Q and the tiles
  }

  // Merge the four warps' partial softmax states.
  float* mo = reinterpret_cast<float*>(smem);  // [kWarps][16][HD]
  float* mm = mo + kWarps * kDecodeRows * HD;  // [kWarps][16]
  float* ml = mm + kWarps * kDecodeRows;       // [kWarps][16]
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float lsum = l[i];
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 1);
    lsum += __shfl_xor_sync(0xffffffffu, lsum, 2);
    const int r = gid + 8 * i;
    float* dst = mo + (warp * kDecodeRows + r) * HD + 2 * tig;
#pragma unroll
    for (int b = 0; b < kDBlocks; ++b)
      *reinterpret_cast<float2*>(dst + b * 8) = make_float2(o[b][2 * i], o[b][2 * i + 1]);
    if (tig == 0) {
      mm[warp * kDecodeRows + r] = m[i] == -INFINITY ? -INFINITY : m[i] * a.scale_log2;  // exp2 domain
      ml[warp * kDecodeRows + r] = lsum;
    }
  }
  __syncthreads();

  const bool split_mode = a.num_splits > 1;
  for (int idx = tid; idx < kDecodeRows * (HD / 4); idx += kThreads) {
    const int r = idx / (HD / 4), d = (idx % (HD / 4)) * 4;
    const int row = row0 + r;
    if (row >= rows) continue;
    float mstar = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mstar = fmaxf(mstar, mm[w * kDecodeRows + r]);
    float lsum = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float mw = mm[w * kDecodeRows + r];
      const float e = mw == -INFINITY ? 0.0f : fast_exp2(mw - mstar);  // a warp that saw no key
      lsum += e * ml[w * kDecodeRows + r];
      const float4 v = *reinterpret_cast<const float4*>(mo + (w * kDecodeRows + r) * HD + d);
      acc.x += e * v.x, acc.y += e * v.y, acc.z += e * v.z, acc.w += e * v.w;
    }
    const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    const int64_t out_row = (int64_t{q_begin} + row / G) * a.q_heads + int64_t{kvh} * G + row % G;
    if (split_mode) {
      const int64_t ws_row = int64_t{split} * a.num_tokens * a.q_heads + out_row;
      *reinterpret_cast<float4*>(a.ws_o + ws_row * HD + d) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (d == 0) a.ws_lse[ws_row] = lsum > 0.0f ? mstar + log2f(lsum) : -INFINITY;
    } else {
      uint2 packed;
      packed.x = Pair<T>::from_floats(acc.x * inv, acc.y * inv);
      packed.y = Pair<T>::from_floats(acc.z * inv, acc.w * inv);
      *reinterpret_cast<uint2*>(static_cast<T*>(a.out) + out_row * HD + d) = packed;
    }
  }
}

template <typename T, int HD>
cudaError_t launch_decode_t(const KernelArgs& a, cudaStream_t stream) {
  using S = DecodeShape<T, HD>;
  const void* fn = reinterpret_cast<const void*>(&decode_kernel<T, HD>);
  const cudaError_t e = ensure_smem_limit(fn, static_cast<int>(S::kBytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(a.num_splits, a.kv_heads * a.head_chunks, a.num_seqs);
  decode_kernel<T, HD><<<grid, kThreads, S::kBytes, stream>>>(a);
  return cudaGetLastError();
}

template <typename T>
cudaError_t launch_decode_dim(const KernelArgs& a, int head_dim, cudaStream_t stream) {
  switch (head_dim) {
    case 64: return launch_decode_t<T, 64>(a, stream);
    case 80: return launch_decode_t<T, 80>(a, stream);
    case 128: return launch_decode_t<T, 128>(a, stream);
    default: return cudaErrorInvalidValue;  // rejected earlier with a Status
  }
}

}  // namespace

size_t decode_smem_bytes(int head_dim) {  // bf16 and f16 tiles have the same size
  switch (head_dim) {
    case 64: return DecodeShape<__nv_bfloat16, 64>::kBytes;
    case 80: return DecodeShape<__nv_bfloat16, 80>::kBytes;
    case 128: return DecodeShape<__nv_bfloat16, 128>::kBytes;
    default: return 0;
  }
}

cudaError_t launch_decode(const KernelArgs& a, bool bf16, int head_dim, cudaStream_t stream) {
  return bf16 ? launch_decode_dim<__nv_bfloat16>(a, head_dim, stream)
              : launch_decode_dim<__half>(a, head_dim, stream);
}

}  // namespace loom::backends::cuda::attention_detail
