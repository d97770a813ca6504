#include "models/qwen_vl/resize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"

namespace loom::models::qwen_vl {
namespace {

// Keys cubic convolution kernel with a = -0.5 (torch's aa bicubic filter, same as Pillow's).
double bicubic_filter(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// Fixed-point taps of one separable pass: output i reads input [start[i], start[i] + taps) with
// weights[i * taps + k] (zero-padded past the row's own tap count).
struct Taps {
  int32_t taps = 0;
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
  t.start.resize(out_size);
  t.count.resize(out_size);
  std::vector<double> w(static_cast<size_t>(out_size) * t.taps, 0.0);
  double max_weight = 0.0;
  for (int32_t i = 0; i < out_size; ++i) {
    const double center = scale * (i + 0.5);
    // Truncation toward zero, as the reference's int64 casts.
    const int32_t lo = std::max(static_cast<int32_t>(center - support + 0.5), 0);
    const int32_t hi = std::min(static_cast<int32_t>(center + support + 0.5), in_size);
    const int32_t n = hi - lo;
    LOOM_CHECK(n >= 0 && n <= t.taps) << "resize taps " << n << " > " << t.taps;
    double* wi = &w[static_cast<size_t>(i) * t.taps];
    double total = 0.0;
    for (int32_t j = 0; j < n; ++j) {
      wi[j] = bicubic_filter((j + lo - center + 0.5) * inv_scale);
      total += wi[j];
    }
    for (int32_t j = 0; j < n; ++j) {
      if (total != 0.0) wi[j] /= total;
      max_weight = std::max(max_weight, wi[j]);
    }
    t.start[i] = lo;
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

// src: [rows][in_w][c] -> dst: [rows][out_w][c], rows [r0, r1) only.
void horizontal_pass(const uint8_t* src, uint8_t* dst, int32_t in_w, int32_t out_w, int32_t c, const Taps& t,
                     int64_t r0, int64_t r1) {
  const int32_t round = 1 << (t.precision - 1);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = src + r * in_w * c;
    uint8_t* out = dst + r * out_w * c;
    for (int32_t x = 0; x < out_w; ++x) {
      const int16_t* w = &t.weights[static_cast<size_t>(x) * t.taps];
      const uint8_t* p = row + static_cast<int64_t>(t.start[x]) * c;
      for (int32_t ch = 0; ch < c; ++ch) {
        int32_t acc = round;
        for (int32_t k = 0; k < t.count[x]; ++k) acc += static_cast<int32_t>(p[k * c + ch]) * w[k];
        out[x * c + ch] = clamp_shift(acc, t.precision);
      }
    }
  }
}

// src: [in_h][row_elems] -> dst: [out_h][row_elems], output rows [r0, r1) only.
void vertical_pass(const uint8_t* src, uint8_t* dst, int64_t row_elems, const Taps& t, int64_t r0,
                   int64_t r1) {
  const int32_t round = 1 << (t.precision - 1);
  std::vector<int32_t> acc(static_cast<size_t>(row_elems));
  for (int64_t y = r0; y < r1; ++y) {
    std::fill(acc.begin(), acc.end(), round);
    const int16_t* w = &t.weights[static_cast<size_t>(y) * t.taps];
    for (int32_t k = 0; k < t.count[y]; ++k) {
      const uint8_t* row = src + (static_cast<int64_t>(t.start[y]) + k) * row_elems;
      const int32_t wk = w[k];
      for (int64_t e = 0; e < row_elems; ++e) acc[e] += static_cast<int32_t>(row[e]) * wk;
    }
    uint8_t* out = dst + y * row_elems;
    for (int64_t e = 0; e < row_elems; ++e) out[e] = clamp_shift(acc[e], t.precision);
  }
}

}  // namespace

std::vector<uint8_t> resize_bicubic_aa_u8(const uint8_t* src, int32_t in_w, int32_t in_h, int32_t channels,
                                          int32_t out_w, int32_t out_h, int num_threads) {
  LOOM_CHECK(in_w > 0 && in_h > 0 && out_w > 0 && out_h > 0)
      << "resize " << in_w << "x" << in_h << " -> " << out_w << "x" << out_h;
  LOOM_CHECK(channels >= 1 && channels <= 4) << "channels " << channels;
  const int64_t c = channels;
  std::vector<uint8_t> cur(src, src + static_cast<int64_t>(in_h) * in_w * c);
  int32_t w = in_w;
  if (out_w != in_w) {
    const Taps t = compute_taps(in_w, out_w);
    std::vector<uint8_t> next(static_cast<size_t>(in_h) * out_w * c);
    parallel_for_rows(in_h, num_threads, [&](int64_t r0, int64_t r1) {
      horizontal_pass(cur.data(), next.data(), in_w, out_w, channels, t, r0, r1);
    });
    cur.swap(next);
    w = out_w;
  }
  if (out_h != in_h) {
    const Taps t = compute_taps(in_h, out_h);
    std::vector<uint8_t> next(static_cast<size_t>(out_h) * w * c);
    parallel_for_rows(out_h, num_threads, [&](int64_t r0, int64_t r1) {
      vertical_pass(cur.data(), next.data(), static_cast<int64_t>(w) * c, t, r0, r1);
    });
    cur.swap(next);
  }
  return cur;
}

}  // namespace loom::models::qwen_vl
