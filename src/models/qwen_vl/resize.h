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
#pragma once

#include <cstdint>
#include <vector>

namespace loom::models::qwen_vl {

// src: [in_h][in_w][channels] uint8, row-major. Returns [out_h][out_w][channels].
// Requires all sizes >= 1 and 1 <= channels <= 4 (LOOM_CHECK). num_threads <= 0 picks
// std::thread::hardware_concurrency().
std::vector<uint8_t> resize_bicubic_aa_u8(const uint8_t* src, int32_t in_w, int32_t in_h, int32_t channels,
                                          int32_t out_w, int32_t out_h, int num_threads = 0);

// Runs fn(begin, end) over [0, n) split into at most num_threads contiguous chunks (<= 0: hardware
// concurrency). Runs inline when one chunk suffices.
template <typename Fn>
void parallel_for_rows(int64_t n, int num_threads, Fn&& fn);

}  // namespace loom::models::qwen_vl

#include "models/qwen_vl/parallel_rows_inl.h"
