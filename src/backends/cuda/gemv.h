// Bandwidth-bound small-M linear layer for decode:  y[M, N] = x[M, K] · w[N, K]^T (+ bias[N]),
// M in 1..8. Same arguments and numerics as Gemm::run (gemm.h: GemmArgs): x and w bf16 or f16
// (the same type), f32 accumulation, y (and bias) in the input type or f32, bias added in f32
// before the single rounding of y; x rows x_stride apart, y rows y_stride apart.
//
// Why: at M <= 8 a linear layer reads N*K weight elements and does 2*M*N*K flops, far below the
// tensor-core rate, so its time is the weight bytes over the memory bandwidth. This kernel reads
// every weight byte once with 16-byte loads and keeps several loads in flight per thread.
//
// Design (vector path; gemv.cu has the details):
//   - A warp owns a tile of 16 weight rows and a contiguous range of K; each step it loads 32
//     K-elements of each of its 16 rows (one 16-byte load per thread per 8-row half) and the
//     matching 32 elements of each x row, and feeds them to two mma.m16n8k16 (bf16/f16 in, f32
//     accumulate) with x as the 16x8 B operand (columns = the M rows, zero-padded to 8). Tensor
//     cores do the multiply-adds, so M = 8 costs no more instruction issue than M = 1.
//   - x is read through the read-only (L1) path straight from global memory: it is at most
//     8 x K x 2 bytes (300 KB at K = 18944), L2-resident, and re-read by every tile.
//   - A CTA holds 1..16 warps on the same row tile, each with its own slice of K (split-K inside
//     the CTA), reduced through 8 KB of shared memory in a fixed order: deterministic, no
//     workspace, no atomics, graph safe. The warp count is chosen on the host from N, K and the
//     SM count so that small-N layers (N = 3584 -> 224 tiles) still put ~16 warps on every SM.
//     Known gap: with fewer row tiles than SMs (N < 16 * SMs, e.g. the k/v projections N = 512)
//     only that many SMs work; cross-CTA split-K would need a persistent zeroed workspace.
//   - Vector path conditions: K % 8 == 0, x_stride % 8 == 0, x and w 16-byte aligned. Anything
//     else takes a scalar path (one warp per weight row, 2-byte loads): correct, slower.
//
// Contract: enqueues on `stream` and returns; never allocates, never synchronises, so calls can
// be captured into CUDA graphs. Argument errors (as Gemm::run, plus m > 8) are InvalidArgument.
#pragma once

#include <cuda_runtime.h>

#include "backends/cuda/gemm.h"
#include "core/status.h"

namespace loom::backends::cuda {

inline constexpr int64_t kGemvMaxRows = 8;

// Enqueues y = x · w^T (+ bias) for 0 <= args.m <= 8 (m == 0 is a no-op).
core::Status gemv(const GemmArgs& args, cudaStream_t stream);

// True when `gemv` would take its 16-byte vector path for these arguments (1 <= m <= 8, bf16/f16
// inputs, a valid output dtype, K % 8 == 0, x_stride % 8 == 0, x and w 16-byte aligned): what
// CudaOps::linear checks before routing a linear here instead of cuBLASLt.
bool gemv_vectorized(const GemmArgs& args);

// LOOM_CUDA_GEMV=0 turns the GEMV dispatch in CudaOps::linear off (cuBLASLt for every M), for A/B
// comparisons. Read once per process; any other value (or unset) leaves it on.
bool gemv_enabled();

}  // namespace loom::backends::cuda
