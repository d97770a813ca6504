// Paged attention for any head_dim that is a multiple of 8 in [8, 256]: the fallback behind
// the tensor-core kernels (which cover 64, 80 and 128). Vision towers (Qwen3-VL: 72), tiny test
// models (8, 16, 32) and other sizes (96, 256) run here.
//
// CUDA cores, f32 math throughout (no rounding of P). Rows are packed as in the other kernels:
// the rows of a CTA are (token, head-in-group) pairs of one kv head, row r -> token r / group,
// q head kv_head * group + r % group, so each K/V tile is read once per kv head.
// One CTA of kWarps warps per (tile of kWarps * 8 rows, kv head, sequence); each warp owns 8
// rows and keeps their online softmax state (m uniform over the warp, l as per-lane partials)
// and O accumulators in registers:
//   Q tile -> f32 shared memory once, pre-multiplied by scale * log2(e) (scores in the exp2
//   domain); then keys [kbeg, kend) (the union of the rows' causal / window ranges) in tiles
//   of 64: block-table lookups -> shared row offsets, K and V rows gathered with 16-byte
//   cp.async into shared memory in the storage type (keys past kend zero-filled, never read);
//   S: lane owns keys lane and lane + 32 of the tile for the warp's 8 rows (K chunks of 8
//      elements from shared, Q rows broadcast as float4);
//   masks (range end, causal diagonal, window start) only on tiles that cross one, online
//   softmax per row with warp shuffles, P -> the warp's [8][64] f32 shared buffer;
//   O += P V: lane owns column pairs lane + 32 j (j < kPairIters = ceil(head_dim / 64)),
//   P read back as float4 broadcasts, V as bf16x2 / half2 words.
// No context split (workspace 0, one launch). Two tile heights, chosen on the host from
// max_q_len * group: 16 rows (2 warps) for decode-like batches, 64 rows (8 warps) otherwise.
#include <climits>
#include <cmath>

#include "backends/cuda/attention/attention_internal.cuh"

namespace loom::backends::cuda::attention_detail {
namespace {

constexpr int kRowsPerWarp = kGenericRowsPerWarp;
constexpr int kKeys = kTileKeys;  // keys per shared tile (64: two per lane)
static_assert(kKeys == 64, "a lane owns keys lane and lane + 32 of a tile");

// Shared-memory row stride (elements) of the K / V tiles: an odd number of 16-byte chunks,
// so the 8 lanes of each quarter-warp LDS.128 phase (8 different keys) hit distinct banks.
__host__ __device__ constexpr int kv_stride(int head_dim) {
  return (head_dim / 8) % 2 == 0 ? head_dim + 8 : head_dim;
}

// Byte offsets of the shared buffers: qs [rows][D] f32, ks and vs [64][kv_stride] storage type
// (2 bytes), ps [warps][8][64] f32, koff [64] int64. Every offset is a multiple of 16.
struct GenericLayout {
  size_t ks, vs, ps, koff, total;
};
__host__ __device__ constexpr GenericLayout generic_layout(int head_dim, int warps) {
  GenericLayout g{};
  g.ks = size_t{4} * warps * kRowsPerWarp * head_dim;
  g.vs = g.ks + size_t{2} * kKeys * kv_stride(head_dim);
  g.ps = g.vs + size_t{2} * kKeys * kv_stride(head_dim);
  g.koff = g.ps + size_t{4} * warps * kRowsPerWarp * kKeys;
  g.total = g.koff + sizeof(int64_t) * kKeys;
  return g;
}

// Register cap 128 per thread (16 resident warps per SM for either CTA height): without it
// ptxas takes ~210 at kPairIters 4 (one 8-warp CTA per SM); with it, no or 4-byte spills.
template <typename T, int kWarps, int kPairIters>
__global__ void __launch_bounds__(kWarps * 32, 16 / kWarps) generic_kernel(const KernelArgs a, int head_dim) {
  static_assert(sizeof(T) == 2, "bf16 / f16 storage");
  constexpr int kCtaThreads = kWarps * 32;
  constexpr int kRows = kWarps * kRowsPerWarp;
  const int D = head_dim;
  const int nchunks = D / 8;  // 16-byte chunks per row
  const int npairs = D / 2;   // output column pairs
  const int kstride = kv_stride(D);
  const GenericLayout lay = generic_layout(D, kWarps);

  extern __shared__ __align__(16) unsigned char smem[];
  float* qs = reinterpret_cast<float*>(smem);                   // [kRows][D], scaled
  T* ks = reinterpret_cast<T*>(smem + lay.ks);                  // [64 keys][kstride]
  T* vs = reinterpret_cast<T*>(smem + lay.vs);                  // [64 keys][kstride]
  float* ps = reinterpret_cast<float*>(smem + lay.ps);          // [kWarps][8 rows][64 keys]
  int64_t* koff = reinterpret_cast<int64_t*>(smem + lay.koff);  // [64] key row offsets (-1: none)

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int seq = blockIdx.z, kvh = blockIdx.y;
  const int G = a.group;

  const int q_begin = a.q_indptr[seq];
  const int q_len = a.q_indptr[seq + 1] - q_begin;
  if (q_len > a.max_q_len) __trap();  // grid too small for this sequence: caller bug
  const int rows = q_len * G;
  const int row0 = blockIdx.x * kRows;
  if (row0 >= rows) return;

  // Key range of this CTA: the union of its rows' visible keys.
  const int kv_len = a.kv_lens[seq];
  const int first_qpos = kv_len - q_len;
  const int qpos_lo = first_qpos + row0 / G;
  const int qpos_hi = first_qpos + (min(row0 + kRows, rows) - 1) / G;
  int kbeg = 0, kend = kv_len;
  if (a.causal) kend = min(kend, qpos_hi + 1);
  if (a.window > 0) kbeg = max(kbeg, qpos_lo - a.window + 1);
  const int n_tiles = kend > kbeg ? (kend - kbeg + kKeys - 1) / kKeys : 0;
  // A tile needs element masks only where it crosses kend, a causal diagonal or a window start.
  const int tile_mask_hi = a.causal ? qpos_lo : INT_MAX;                     // min over rows of hi
  const int tile_mask_lo = a.window > 0 ? qpos_hi - a.window + 1 : INT_MIN;  // max over rows of lo

  const T* q = static_cast<const T*>(a.q);
  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const int32_t* table = a.block_table + int64_t{seq} * a.max_blocks_per_seq;

  // Q tile: rows past the sequence are zero (their results are never written).
  for (int idx = tid; idx < kRows * nchunks; idx += kCtaThreads) {
    const int r = idx / nchunks, c = idx % nchunks;
    const int row = row0 + r;
    float f[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    if (row < rows) {
      const int64_t src = ((int64_t{q_begin} + row / G) * a.q_heads + int64_t{kvh} * G + row % G) * D + c * 8;
      unpack8<T>(__ldg(reinterpret_cast<const uint4*>(q + src)), f);
    }
    float4* dst = reinterpret_cast<float4*>(qs + r * D + c * 8);
    const float sl = a.scale_log2;
    dst[0] = make_float4(f[0] * sl, f[1] * sl, f[2] * sl, f[3] * sl);
    dst[1] = make_float4(f[4] * sl, f[5] * sl, f[6] * sl, f[7] * sl);
  }

  // This warp's rows: wrow0 + r, r < 8.
  const int wrow0 = row0 + warp * kRowsPerWarp;
  const float* qw = qs + warp * kRowsPerWarp * D;
  float* pw = ps + warp * kRowsPerWarp * kKeys;

  float o[kRowsPerWarp][kPairIters][2];
  float m[kRowsPerWarp], l[kRowsPerWarp];  // m: running max (exp2 domain, warp-uniform); l: lane partial sums
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int j = 0; j < kPairIters; ++j) o[r][j][0] = o[r][j][1] = 0.0f;
  }

  for (int t = 0; t < n_tiles; ++t) {
    const int kt = kbeg + t * kKeys;
    const int nk = min(kKeys, kend - kt);  // keys of this tile inside [kbeg, kend)
    __syncthreads();                       // every warp is done with the previous tile (and Q is stored)
    if (tid < kKeys) {
      const int kpos = kt + tid;
      int64_t off = -1;
      if (kpos < kend) {
        const int64_t slot = int64_t{__ldg(table + kpos / a.block_size)} * a.block_size + kpos % a.block_size;
        off = (slot * a.kv_heads + kvh) * D;
      }
      koff[tid] = off;
    }
    __syncthreads();
    for (int idx = tid; idx < kKeys * nchunks; idx += kCtaThreads) {
      const int r = idx / nchunks, c = idx % nchunks;
      const int64_t off = koff[r];
      const bool valid = off >= 0;
      const int64_t src = (valid ? off : 0) + c * 8;
      cp_async_16(ks + r * kstride + c * 8, kc + src, valid);
      cp_async_16(vs + r * kstride + c * 8, vc + src, valid);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();

    // S = (scaled Q) K^T: s[r][0] for key kt + lane, s[r][1] for key kt + lane + 32.
    float s[kRowsPerWarp][2];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) s[r][0] = s[r][1] = 0.0f;
    {
      const T* k0 = ks + lane * kstride;
      const T* k1 = ks + (lane + 32) * kstride;
      for (int c = 0; c < nchunks; ++c) {
        float ka[8], kb[8];
        unpack8<T>(*reinterpret_cast<const uint4*>(k0 + c * 8), ka);
        unpack8<T>(*reinterpret_cast<const uint4*>(k1 + c * 8), kb);
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          const float4 x = *reinterpret_cast<const float4*>(qw + r * D + c * 8);
          const float4 y = *reinterpret_cast<const float4*>(qw + r * D + c * 8 + 4);
          const float qv[8] = {x.x, x.y, x.z, x.w, y.x, y.y, y.z, y.w};
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            s[r][0] = fmaf(qv[e], ka[e], s[r][0]);
            s[r][1] = fmaf(qv[e], kb[e], s[r][1]);
          }
        }
      }
    }

    // Masks (rows past the sequence get positions past the end: harmless, never written).
    const bool need_mask = kt + kKeys > kend || kt + kKeys - 1 > tile_mask_hi || kt < tile_mask_lo;
    if (need_mask) {
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const int qpos = first_qpos + (wrow0 + r) / G;
        const int hi = a.causal ? qpos : INT_MAX;
        const int lo = a.window > 0 ? qpos - a.window + 1 : INT_MIN;
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int kpos = kt + lane + 32 * e;
          if (kpos >= kend || kpos > hi || kpos < lo) s[r][e] = -INFINITY;
        }
      }
    }

    // Online softmax per row; p -> the warp's P buffer.
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const float m_new = fmaxf(m[r], warp_max(fmaxf(s[r][0], s[r][1])));
      const float base = m_new == -INFINITY ? 0.0f : m_new;  // nothing visible yet: p = 0
      const float alpha = fast_exp2(m[r] - base);            // 0 when m was -inf, 1 when unchanged
      const float p0 = fast_exp2(s[r][0] - base), p1 = fast_exp2(s[r][1] - base);
      m[r] = m_new;
      l[r] = l[r] * alpha + p0 + p1;
#pragma unroll
      for (int j = 0; j < kPairIters; ++j) {
        o[r][j][0] *= alpha;
        o[r][j][1] *= alpha;
      }
      pw[r * kKeys + lane] = p0;
      pw[r * kKeys + lane + 32] = p1;
    }
    __syncwarp();

    // O += P V over the nk keys of the tile (keys past nk have p = 0 and zero V rows).
    // Lanes whose column pair is past the row read a valid one and never store it.
    int vcol[kPairIters];
#pragma unroll
    for (int j = 0; j < kPairIters; ++j) vcol[j] = 2 * min(lane + 32 * j, npairs - 1);
    for (int k4 = 0; k4 < nk; k4 += 4) {
      float4 p[kRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) p[r] = *reinterpret_cast<const float4*>(pw + r * kKeys + k4);
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        const T* vrow = vs + (k4 + kk) * kstride;
#pragma unroll
        for (int j = 0; j < kPairIters; ++j) {
          const float2 v = Pair<T>::to_float2(*reinterpret_cast<const uint32_t*>(vrow + vcol[j]));
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) {
            const float pr = kk == 0 ? p[r].x : kk == 1 ? p[r].y : kk == 2 ? p[r].z : p[r].w;
            o[r][j][0] = fmaf(pr, v.x, o[r][j][0]);
            o[r][j][1] = fmaf(pr, v.y, o[r][j][1]);
          }
        }
      }
    }
  }

  // Epilogue: normalise and round once.
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const float lsum = warp_sum(l[r]);
    const int row = wrow0 + r;
    if (row >= rows) continue;
    const float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
    const int64_t out_row = (int64_t{q_begin} + row / G) * a.q_heads + int64_t{kvh} * G + row % G;
#pragma unroll
    for (int j = 0; j < kPairIters; ++j) {
      const int cp = lane + 32 * j;
      if (cp < npairs)
        *reinterpret_cast<uint32_t*>(out + out_row * D + 2 * cp) =
            Pair<T>::from_floats(o[r][j][0] * inv, o[r][j][1] * inv);
    }
  }
}

template <typename T, int kWarps, int kPairIters>
cudaError_t launch_generic_t(const KernelArgs& a, int head_dim, int row_tiles, cudaStream_t stream) {
  const size_t bytes = generic_layout(head_dim, kWarps).total;
  const void* fn = reinterpret_cast<const void*>(&generic_kernel<T, kWarps, kPairIters>);
  const cudaError_t e = ensure_smem_limit(fn, static_cast<int>(bytes));
  if (e != cudaSuccess) return e;
  const dim3 grid(row_tiles, a.kv_heads, a.num_seqs);
  generic_kernel<T, kWarps, kPairIters><<<grid, kWarps * 32, bytes, stream>>>(a, head_dim);
  return cudaGetLastError();
}

template <typename T, int kWarps>
cudaError_t launch_generic_warps(const KernelArgs& a, int head_dim, int row_tiles, cudaStream_t stream) {
  switch ((head_dim + 63) / 64) {  // column pairs per lane
    case 1: return launch_generic_t<T, kWarps, 1>(a, head_dim, row_tiles, stream);
    case 2: return launch_generic_t<T, kWarps, 2>(a, head_dim, row_tiles, stream);
    case 3: return launch_generic_t<T, kWarps, 3>(a, head_dim, row_tiles, stream);
    case 4: return launch_generic_t<T, kWarps, 4>(a, head_dim, row_tiles, stream);
    default: return cudaErrorInvalidValue;  // rejected earlier with a Status
  }
}

template <typename T>
cudaError_t launch_generic_dtype(const KernelArgs& a, int head_dim, bool wide, int row_tiles,
                                 cudaStream_t stream) {
  return wide ? launch_generic_warps<T, kGenericWideRows / kRowsPerWarp>(a, head_dim, row_tiles, stream)
              : launch_generic_warps<T, kGenericNarrowRows / kRowsPerWarp>(a, head_dim, row_tiles, stream);
}

}  // namespace

size_t generic_smem_bytes(int head_dim, bool wide) {
  return generic_layout(head_dim, (wide ? kGenericWideRows : kGenericNarrowRows) / kRowsPerWarp).total;
}

cudaError_t launch_generic(const KernelArgs& a, bool bf16, int head_dim, bool wide, int row_tiles,
                           cudaStream_t stream) {
  if (head_dim < kGenericMinHeadDim || head_dim > kGenericMaxHeadDim || head_dim % 8 != 0)
    return cudaErrorInvalidValue;  // rejected earlier with a Status
  return bf16 ? launch_generic_dtype<__nv_bfloat16>(a, head_dim, wide, row_tiles, stream)
              : launch_generic_dtype<__half>(a, head_dim, wide, row_tiles, stream);
}

}  // namespace loom::backends::cuda::attention_detail
