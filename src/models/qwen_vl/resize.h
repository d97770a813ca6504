// Antialiased bicubic resize of interleaved 8-bit images, bit-exact with torch's CPU uint8 path
// (`torch.nn.functional.interpolate(mode="bicubic", antialias=True)` on uint8, which is what
// torchvision.transforms.v2.functional.resize runs for BICUBIC uint8 tensors on CPU, and so what
// transformers 5's default Qwen2-VL image processor uses).
//
// Algorithm (separable, Pillow-style):
//   scale = in / out; support = 2 * max(scale, 1); filter = Keys cubic with a = -0.5 evaluated at
//   (src - center + 0.5) / max(scale, 1); weights per output pixel normalised to sum 1 (in double),
//   then quantised to int16 with the largest precision p <= 22 that keeps max_weight * 2^(p+1) below
//   2^15. Each pass accumulates in int32 starting from 2^(p-1), shifts right by p, clamps to [0, 255].
//   Horizontal pass first (skipped when widths are equal), then vertical (skipped when heights are).
//
// Implementation: the two passes are fused per thread (each thread owns a band of output rows and
// keeps the few horizontally resized rows its vertical taps need in a small ring buffer, so the
// intermediate image never exists in full). The sums are exact int32 integer arithmetic, so the
// order of accumulation is free: the AVX2 kernels (3/4-channel horizontal pass, vertical pass; chosen
// at run time by a CPU check) give the same bytes as the portable scalar kernels.
#pragma once

#include <cstdint>
#include <vector>

namespace loom::models::qwen_vl {

// src: [in_h][in_w][channels] uint8, row-major. Returns [out_h][out_w][channels].
// Requires all sizes >= 1 and 1 <= channels <= 4 (LOOM_CHECK). num_threads <= 0 picks
// std::thread::hardware_concurrency(); work is split over threads by output rows.
std::vector<uint8_t> resize_bicubic_aa_u8(const uint8_t* src, int32_t in_w, int32_t in_h, int32_t channels,
                                          int32_t out_w, int32_t out_h, int num_threads = 0);

// As above, writing [out_h][out_w][channels] to dst (caller-owned, need not be initialised, must not
// overlap src). Lets a caller reuse one buffer and skip the zero-fill of a fresh std::vector.
// allow_simd = false forces the portable scalar kernels (tests compare the two paths).
void resize_bicubic_aa_u8_into(const uint8_t* src, int32_t in_w, int32_t in_h, int32_t channels,
                               int32_t out_w, int32_t out_h, uint8_t* dst, int num_threads = 0,
                               bool allow_simd = true);

// Runs fn(begin, end) over [0, n) split into at most num_threads contiguous chunks (<= 0: hardware
// concurrency). Runs inline when one chunk suffices.
template <typename Fn>
void parallel_for_rows(int64_t n, int num_threads, Fn&& fn);

}  // namespace loom::models::qwen_vl

#include "models/qwen_vl/parallel_rows_inl.h"
