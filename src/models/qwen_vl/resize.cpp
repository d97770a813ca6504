#include "models/qwen_vl/resize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define LOOM_RESIZE_X86 1
#define LOOM_AVX2 __attribute__((target("avx2")))
#else
#define LOOM_RESIZE_X86 0
#endif

namespace loom::models::qwen_vl {
namespace {

// Taps are padded to a multiple of this: the AVX2 horizontal kernel reads 4 taps per step.
constexpr int32_t kTapBlock = 4;

// Keys cubic convolution kernel with a = -0.5 (torch's aa bicubic filter, same as Pillow's).
double bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// Fixed-point taps of one separable pass: output i reads input [start[i], start[i] + count[i]) with
// weights[i * stride + k]; stride = taps rounded up to kTapBlock, weights are zero past count[i].
// start and start + count are non-decreasing in i (the fused driver relies on it).
struct Taps {
  int32_t taps = 0;
  int32_t stride = 0;
  int32_t precision = 0;
  std::vector<int32_t> start;
  std::vector<int32_t> count;
  std::vector<int16_t> weights;
};

Taps compute_taps(int32_t in_size, int32_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double support = scale >= 1.0 ? 2.0 * scale : 2.0;
  const double inv_scale = scale >= 1.0 ? 1.0 / scale : 1.0;
  Taps t;
  t.taps = static_cast<int32_t>(std::ceil(support)) * 2 + 1;
  t.stride = (t.taps + kTapBlock - 1) / kTapBlock * kTapBlock;
  t.start.resize(out_size);
  t.count.resize(out_size);
  std::vector<double> w(static_cast<size_t>(out_size) * t.stride, 0.0);
  double max_weight = 0.0;
  for (int32_t i = 0; i < out_size; ++i) {
    const double center = scale * (i + 0.5);
    // Truncation toward zero, as the reference's int64 casts.
    const int32_t lo = std::max(static_cast<int32_t>(center - support + 0.5), 0);
    const int32_t hi = std::min(static_cast<int32_t>(center + support + 0.5), in_size);
    const int32_t n = std::max(hi - lo, 0);
    LOOM_CHECK(n <= t.taps) << "resize taps " << n << " > " << t.taps;
    double* wi = &w[static_cast<size_t>(i) * t.stride];
    double total = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      wi[j] = bicubic_filter((j + lo - center + 0.5) * inv_scale);
      total += wi[j];
    }
    for (int32_t j = 0; j < n; ++j) {
      if (total != 0.0) wi[j] /= total;
      max_weight = std::max(max_weight, wi[j]);
    }
    t.start[i] = std::min(lo, in_size - 1);
    t.count[i] = n;
  }
  int32_t p = 0;
  for (; p < 22; ++p) {
    const int next = static_cast<int>(0.5 + max_weight * static_cast<double>(1 << (p + 1)));
    if (next >= (1 << 15)) break;
  }
  LOOM_CHECK(p >= 1) << "resize weight precision " << p;
  t.precision = p;
  t.weights.resize(w.size());
  const double one = static_cast<double>(1 << p);
  for (size_t k = 0; k < w.size(); ++k) {
    const double v = w[k] * one;
    t.weights[k] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
  }
  return t;
}

inline uint8_t clamp_shift(int32_t acc, int32_t precision) {
  return static_cast<uint8_t>(std::clamp(acc >> precision, 0, 255));
}

// Everything a horizontal row kernel needs, shared read-only by all threads.
struct HorizontalPlan {
  const Taps* t = nullptr;
  int32_t c = 0;
  int32_t out_w = 0;
  // AVX2 only: every output pixel takes `steps` steps of 4 taps (the most any pixel needs: a
  // fixed trip count branches predictably; the surplus taps have zero weights); weights expanded per
  // step to 16 int16 ([w0 w1] x4 | [w2 w3] x4, matching the pixel shuffle); read_end = bytes past
  // the row start that the 16-byte loads touch (pixels past the row's end meet zero weights).
  int32_t max_groups = 0;
  int32_t steps = 0;
  std::vector<int64_t> read_end;
  std::vector<int16_t> wide;
};

HorizontalPlan make_horizontal_plan(const Taps& t, int32_t c, int32_t out_w, bool simd) {
  HorizontalPlan hp;
  hp.t = &t;
  hp.c = c;
  hp.out_w = out_w;
  if (!simd) return hp;
  hp.max_groups = t.stride / kTapBlock;
  for (int32_t x = 0; x < out_w; ++x) hp.steps = std::max(hp.steps, (t.count[x] + kTapBlock - 1) / kTapBlock);
  hp.read_end.resize(out_w);
  hp.wide.assign(static_cast<size_t>(out_w) * hp.max_groups * 16, 0);
  for (int32_t x = 0; x < out_w; ++x) {
    const int32_t g = hp.steps;
    hp.read_end[x] = g == 0 ? 0 : (static_cast<int64_t>(t.start[x]) + kTapBlock * (g - 1)) * c + 16;
    const int16_t* w = &t.weights[static_cast<size_t>(x) * t.stride];
    int16_t* out = &hp.wide[static_cast<size_t>(x) * hp.max_groups * 16];
    for (int32_t s = 0; s < hp.max_groups; ++s)
      for (int32_t j = 0; j < 16; ++j) out[s * 16 + j] = w[s * kTapBlock + (j >= 8 ? 2 : 0) + (j & 1)];
  }
  return hp;
}

// One row: src_row [in_w][c] -> dst_row [out_w][c]. avail = bytes readable from src_row on.
using HorizontalRowFn = void (*)(const HorizontalPlan&, const uint8_t* src_row, int64_t avail,
                                 uint8_t* dst_row);
// One output row: dst[e] = clamp((round + sum_k rows[k][e] * w[k]) >> precision), e < elems.
using VerticalRowFn = void (*)(const uint8_t* const* rows, int32_t n, const int16_t* w, int32_t precision,
                               int64_t elems, uint8_t* dst);

template <int C>
void horizontal_row_scalar(const HorizontalPlan& hp, const uint8_t* row, int64_t /*avail*/, uint8_t* out) {
  const Taps& t = *hp.t;
  const int32_t round = 1 << (t.precision - 1);
  for (int32_t x = 0; x < hp.out_w; ++x) {
    const int16_t* w = &t.weights[static_cast<size_t>(x) * t.stride];
    const uint8_t* p = row + static_cast<int64_t>(t.start[x]) * C;
    int32_t acc[C];
    for (int ch = 0; ch < C; ++ch) acc[ch] = round;
    for (int32_t k = 0; k < t.count[x]; ++k)
      for (int ch = 0; ch < C; ++ch) acc[ch] += static_cast<int32_t>(p[k * C + ch]) * w[k];
    for (int ch = 0; ch < C; ++ch) out[x * C + ch] = clamp_shift(acc[ch], t.precision);
  }
}

void vertical_row_scalar(const uint8_t* const* rows, int32_t n, const int16_t* w, int32_t precision,
                         int64_t elems, uint8_t* dst) {
  // Chunked so the accumulators stay in L1 and the inner loops are plain vectorisable row sums.
  constexpr int64_t kChunk = 512;
  int32_t acc[kChunk];
  const int32_t round = 1 << (precision - 1);
  for (int64_t e0 = 0; e0 < elems; e0 += kChunk) {
    const int64_t len = std::min(kChunk, elems - e0);
    for (int64_t e = 0; e < len; ++e) acc[e] = round;
    for (int32_t k = 0; k < n; ++k) {
      const uint8_t* row = rows[k] + e0;
      const int32_t wk = w[k];
      for (int64_t e = 0; e < len; ++e) acc[e] += static_cast<int32_t>(row[e]) * wk;
    }
    for (int64_t e = 0; e < len; ++e) dst[e0 + e] = clamp_shift(acc[e], precision);
  }
}

#if LOOM_RESIZE_X86

// Taps of one output pixel, 4 per step: 16 bytes loaded and broadcast to both lanes; the shuffle
// puts taps (0, 1) in the low lane and (2, 3) in the high one as int16 pairs per channel
// ([c0 of tap a, c0 of tap b, c1 a, c1 b, ...]) for madd against the matching weight pairs.
// Returns acc_init + per-lane sums ([ch0..ch3] int32 per lane; unused channels sum to 0).
// kSteps > 0 fixes the step count at compile time (unrolled), 0 reads hp.steps.
template <int C, int kSteps>
LOOM_AVX2 inline __m256i horizontal_taps_avx2(const HorizontalPlan& hp, const uint8_t* row, int32_t x,
                                              __m256i shuf, __m256i acc) {
  const uint8_t* p = row + static_cast<int64_t>(hp.t->start[x]) * C;
  const int16_t* w = &hp.wide[static_cast<size_t>(x) * hp.max_groups * 16];
  const int32_t steps = kSteps > 0 ? kSteps : hp.steps;
  for (int32_t g = 0; g < steps; ++g) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + g * kTapBlock * C));
    const __m256i v = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(raw), shuf);
    const __m256i wv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * 16));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(v, wv));
  }
  return acc;
}

// One output pixel's [ch0..ch3] sums plus the rounding term, for the row's ragged ends: the
// 16-byte loads are used only where they stay inside the source buffer.
template <int C>
LOOM_AVX2 inline __m128i horizontal_pixel_avx2(const HorizontalPlan& hp, const uint8_t* row, int64_t avail,
                                               int32_t x, __m256i shuf, __m128i round) {
  const Taps& t = *hp.t;
  if (hp.read_end[x] > avail) {
    const uint8_t* p = row + static_cast<int64_t>(t.start[x]) * C;
    alignas(16) int32_t acc[4] = {0, 0, 0, 0};
    const int16_t* w = &t.weights[static_cast<size_t>(x) * t.stride];
    for (int32_t k = 0; k < t.count[x]; ++k)
      for (int ch = 0; ch < C; ++ch) acc[ch] += static_cast<int32_t>(p[k * C + ch]) * w[k];
    return _mm_add_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(acc)), round);
  }
  const __m256i acc = horizontal_taps_avx2<C, 0>(hp, row, x, shuf, _mm256_setzero_si256());
  const __m128i s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  return _mm_add_epi32(s, round);
}

template <int C, int kSteps>
LOOM_AVX2 void horizontal_row_avx2(const HorizontalPlan& hp, const uint8_t* row, int64_t avail,
                                   uint8_t* out) {
  static_assert(C == 3 || C == 4);
  const __m256i shuf = C == 3
                           ? _mm256_setr_epi8(0, -1, 3, -1, 1, -1, 4, -1, 2, -1, 5, -1, -1, -1, -1, -1,  //
                                              6, -1, 9, -1, 7, -1, 10, -1, 8, -1, 11, -1, -1, -1, -1, -1)
                           : _mm256_setr_epi8(0, -1, 4, -1, 1, -1, 5, -1, 2, -1, 6, -1, 3, -1, 7, -1,  //
                                              8, -1, 12, -1, 9, -1, 13, -1, 10, -1, 14, -1, 11, -1, 15, -1);
  // Bytes of pixels [0 2 1 3] (4 bytes each, as the packs below leave them) -> pixels 0 1 2 3, and
  // for C = 3 the unused 4th byte dropped (12 bytes).
  const __m128i order = C == 3 ? _mm_setr_epi8(0, 1, 2, 8, 9, 10, 4, 5, 6, 12, 13, 14, -1, -1, -1, -1)
                               : _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15);
  const int32_t precision = hp.t->precision;
  const __m128i round = _mm_set1_epi32(1 << (precision - 1));
  // The rounding term in the low lane only: the two lanes are summed once per pixel.
  const __m256i round_lo = _mm256_zextsi128_si256(round);
  const __m128i shift = _mm_cvtsi32_si128(precision);
  const int32_t out_w = hp.out_w;
  int32_t x = 0;
  // Groups of 4 pixels whose loads all stay in the buffer (read_end grows with x). The lane sums of
  // pixels (0, 1) and (2, 3) are formed two at a time: [p0 | p1] = lo/hi lane swaps, added.
  for (; x + 4 <= out_w && hp.read_end[x + 3] <= avail; x += 4) {
    const __m256i a0 = horizontal_taps_avx2<C, kSteps>(hp, row, x, shuf, round_lo);
    const __m256i a1 = horizontal_taps_avx2<C, kSteps>(hp, row, x + 1, shuf, round_lo);
    const __m256i a2 = horizontal_taps_avx2<C, kSteps>(hp, row, x + 2, shuf, round_lo);
    const __m256i a3 = horizontal_taps_avx2<C, kSteps>(hp, row, x + 3, shuf, round_lo);
    __m256i s01 =
        _mm256_add_epi32(_mm256_permute2x128_si256(a0, a1, 0x20), _mm256_permute2x128_si256(a0, a1, 0x31));
    __m256i s23 =
        _mm256_add_epi32(_mm256_permute2x128_si256(a2, a3, 0x20), _mm256_permute2x128_si256(a2, a3, 0x31));
    s01 = _mm256_sra_epi32(s01, shift);
    s23 = _mm256_sra_epi32(s23, shift);
    // Saturating packs = clamp to [0, 255] of the shifted sums, as clamp_shift.
    const __m256i s16 = _mm256_packs_epi32(s01, s23);  // int16 [p0 p2 | p1 p3]
    __m128i b = _mm_packus_epi16(_mm256_castsi256_si128(s16), _mm256_extracti128_si256(s16, 1));
    b = _mm_shuffle_epi8(b, order);
    uint8_t* o = out + static_cast<int64_t>(x) * C;
    // For C = 3 a 16-byte store writes 4 bytes past these 4 pixels: only when they lie in this
    // row's next two pixels (written right after), never in another row (maybe another thread's).
    if (C == 4 || x + 6 <= out_w) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o), b);
    } else {
      std::memcpy(o, &b, 12);
    }
  }
  for (; x < out_w; ++x) {
    const __m128i s = _mm_sra_epi32(horizontal_pixel_avx2<C>(hp, row, avail, x, shuf, round), shift);
    const __m128i b = _mm_packus_epi16(_mm_packs_epi32(s, s), s);
    const int32_t v = _mm_cvtsi128_si32(b);
    std::memcpy(out + static_cast<int64_t>(x) * C, &v, C);
  }
}

// 32 elements at a time: rows taken in pairs, bytes of the two rows interleaved and widened to
// int16 pairs, madd against the (w[k], w[k+1]) pair; an odd last row pairs with zeros. The unpacks
// and the final packs are both lane-wise in matching order, so the packs restore element order.
LOOM_AVX2 void vertical_row_avx2(const uint8_t* const* rows, int32_t n, const int16_t* w, int32_t precision,
                                 int64_t elems, uint8_t* dst) {
  const __m256i round = _mm256_set1_epi32(1 << (precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(precision);
  const __m256i zero = _mm256_setzero_si256();
  int64_t e = 0;
  for (; e + 32 <= elems; e += 32) {
    __m256i a0 = round, a1 = round, a2 = round, a3 = round;
    for (int32_t k = 0; k < n; k += 2) {
      const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[k] + e));
      __m256i q = zero;
      int32_t pair = static_cast<uint16_t>(w[k]);
      if (k + 1 < n) {
        q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows[k + 1] + e));
        std::memcpy(&pair, w + k, sizeof(pair));  // (w[k], w[k+1]) as the int16 pair of madd
      }
      const __m256i wv = _mm256_set1_epi32(pair);
      const __m256i lo = _mm256_unpacklo_epi8(p, q);
      const __m256i hi = _mm256_unpackhi_epi8(p, q);
      a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_unpacklo_epi8(lo, zero), wv));
      a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_unpackhi_epi8(lo, zero), wv));
      a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_unpacklo_epi8(hi, zero), wv));
      a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_unpackhi_epi8(hi, zero), wv));
    }
    a0 = _mm256_sra_epi32(a0, shift);
    a1 = _mm256_sra_epi32(a1, shift);
    a2 = _mm256_sra_epi32(a2, shift);
    a3 = _mm256_sra_epi32(a3, shift);
    const __m256i b = _mm256_packus_epi16(_mm256_packs_epi32(a0, a1), _mm256_packs_epi32(a2, a3));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + e), b);
  }
  for (; e < elems; ++e) {  // < 32 tail elements
    int32_t acc = 1 << (precision - 1);
    for (int32_t k = 0; k < n; ++k) acc += static_cast<int32_t>(rows[k][e]) * w[k];
    dst[e] = clamp_shift(acc, precision);
  }
}

bool cpu_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

#endif  // LOOM_RESIZE_X86

HorizontalRowFn pick_horizontal(int32_t c, bool simd, int32_t steps) {
#if LOOM_RESIZE_X86
  if (simd && c == 3)
    return steps == 1   ? horizontal_row_avx2<3, 1>
           : steps == 2 ? horizontal_row_avx2<3, 2>
           : steps == 3 ? horizontal_row_avx2<3, 3>
                        : horizontal_row_avx2<3, 0>;
  if (simd && c == 4)
    return steps == 1   ? horizontal_row_avx2<4, 1>
           : steps == 2 ? horizontal_row_avx2<4, 2>
           : steps == 3 ? horizontal_row_avx2<4, 3>
                        : horizontal_row_avx2<4, 0>;
#else
  (void)simd;
  (void)steps;
#endif
  switch (c) {
    case 1: return horizontal_row_scalar<1>;
    case 2: return horizontal_row_scalar<2>;
    case 3: return horizontal_row_scalar<3>;
    default: return horizontal_row_scalar<4>;
  }
}

VerticalRowFn pick_vertical(bool simd) {
#if LOOM_RESIZE_X86
  if (simd) return vertical_row_avx2;
#else
  (void)simd;
#endif
  return vertical_row_scalar;
}

}  // namespace

void resize_bicubic_aa_u8_into(const uint8_t* src, int32_t in_w, int32_t in_h, int32_t channels,
                               int32_t out_w, int32_t out_h, uint8_t* dst, int num_threads, bool allow_simd) {
  LOOM_CHECK(in_w > 0 && in_h > 0 && out_w > 0 && out_h > 0)
      << "resize " << in_w << "x" << in_h << " -> " << out_w << "x" << out_h;
  LOOM_CHECK(channels >= 1 && channels <= 4) << "channels " << channels;
  const int64_t c = channels;
  const int64_t in_row = in_w * c;
  const int64_t out_row = out_w * c;
  const int64_t src_bytes = in_h * in_row;
  if (out_w == in_w && out_h == in_h) {
    std::memcpy(dst, src, static_cast<size_t>(src_bytes));
    return;
  }
#if LOOM_RESIZE_X86
  const bool simd = allow_simd && cpu_has_avx2();
#else
  (void)allow_simd;
  const bool simd = false;
#endif
  const bool horizontal = out_w != in_w;
  const bool vertical = out_h != in_h;
  Taps ht, vt;
  HorizontalPlan hp;
  if (horizontal) {
    ht = compute_taps(in_w, out_w);
    hp = make_horizontal_plan(ht, channels, out_w, simd && (channels == 3 || channels == 4));
  }
  if (vertical) vt = compute_taps(in_h, out_h);
  const HorizontalRowFn hrow = pick_horizontal(channels, hp.max_groups > 0, hp.steps);
  const VerticalRowFn vrow = pick_vertical(simd);
  auto src_row = [&](int64_t r) { return src + r * in_row; };

  if (!vertical) {
    parallel_for_rows(out_h, num_threads, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) hrow(hp, src_row(r), src_bytes - r * in_row, dst + r * out_row);
    });
    return;
  }
  // Each thread: output rows [y0, y1). Without a horizontal pass the vertical taps read src rows;
  // with one, a ring of vt.taps resized rows holds input row r in slot r % vt.taps. Windows
  // [start, start + count) only move forward, so a row is computed once per thread and still in
  // its slot whenever a later output row needs it.
  parallel_for_rows(out_h, num_threads, [&](int64_t y0, int64_t y1) {
    const int32_t cap = std::max(vt.taps, 1);
    std::unique_ptr<uint8_t[]> ring;  // uninitialised: every row is written before it is read
    if (horizontal) ring.reset(new uint8_t[static_cast<size_t>(cap * out_row)]);
    std::vector<const uint8_t*> rows(static_cast<size_t>(cap));
    int64_t next = 0;  // first input row not yet in the ring
    for (int64_t y = y0; y < y1; ++y) {
      const int64_t lo = vt.start[y];
      const int32_t n = vt.count[y];
      if (horizontal) {
        next = std::max(next, lo);
        for (; next < lo + n; ++next)
          hrow(hp, src_row(next), src_bytes - next * in_row, ring.get() + (next % cap) * out_row);
        for (int32_t k = 0; k < n; ++k) rows[k] = ring.get() + ((lo + k) % cap) * out_row;
      } else {
        for (int32_t k = 0; k < n; ++k) rows[k] = src_row(lo + k);
      }
      vrow(rows.data(), n, &vt.weights[static_cast<size_t>(y) * vt.stride], vt.precision, out_row,
           dst + y * out_row);
    }
  });
}

std::vector<uint8_t> resize_bicubic_aa_u8(const uint8_t* src, int32_t in_w, int32_t in_h, int32_t channels,
                                          int32_t out_w, int32_t out_h, int num_threads) {
  LOOM_CHECK(in_w > 0 && in_h > 0 && out_w > 0 && out_h > 0)
      << "resize " << in_w << "x" << in_h << " -> " << out_w << "x" << out_h;
  LOOM_CHECK(channels >= 1 && channels <= 4) << "channels " << channels;
  std::vector<uint8_t> out(static_cast<size_t>(out_h) * out_w * channels);
  resize_bicubic_aa_u8_into(src, in_w, in_h, channels, out_w, out_h, out.data(), num_threads);
  return out;
}

}  // namespace loom::models::qwen_vl
