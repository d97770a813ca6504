#include "models/qwen3_vl/vision_layout.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace loom::models::qwen3_vl {
namespace {

struct AxisTaps {
  int32_t tap[2];
  float weight[2];
};

// transformers' _interpolation_axis_taps_weights for mode "bilinear", align_corners=True, border
// padding, op for op in f32: src = index * (side - 1) / max(size - 1, 1); taps floor(src) and
// floor(src) + 1 clamped to [0, side); weights max(1 - |src - floor - offset|, 0).
AxisTaps axis_taps(int64_t index, int64_t size, int64_t side) {
  const float src = (static_cast<float>(index) * static_cast<float>(side - 1)) /
                    static_cast<float>(std::max<int64_t>(size - 1, 1));
  const float fl = std::floor(src);
  const float frac = src - fl;
  AxisTaps a;
  for (int o = 0; o < 2; ++o) {
    const int64_t raw = static_cast<int64_t>(fl) + o;
    a.tap[o] = static_cast<int32_t>(std::clamp<int64_t>(raw, 0, side - 1));
    const float distance = std::fabs(frac - static_cast<float>(o));
    a.weight[o] = std::max(1.0f - distance, 0.0f);
  }
  return a;
}

}  // namespace

core::Expected<VisionLayout> make_vision_layout(const VisionConfig& c,
                                                std::span<const std::array<int64_t, 3>> grids) {
  if (grids.empty()) return core::invalid_argument("no image/video grids given to the vision tower");
  const int64_t m = c.spatial_merge_size;
  int64_t total = 0;
  for (const auto& [t, h, w] : grids) {
    if (t <= 0 || h <= 0 || w <= 0) {
      return core::invalid_argument("grid_thw entries must be positive, got (" + std::to_string(t) + ", " +
                                    std::to_string(h) + ", " + std::to_string(w) + ")");
    }
    if (h % m != 0 || w % m != 0) {
      return core::invalid_argument("grid h and w must be multiples of spatial_merge_size " +
                                    std::to_string(m) + ", got " + std::to_string(h) + " x " +
                                    std::to_string(w));
    }
    if (t > std::numeric_limits<int32_t>::max() / h / w ||
        total > std::numeric_limits<int32_t>::max() - t * h * w) {
      return core::invalid_argument("too many vision patches for one forward");
    }
    total += t * h * w;
  }

  VisionLayout l;
  l.num_patches = total;
  l.num_units = total / c.merge_unit();
  l.cu_seqlens.push_back(0);
  l.pos_h.reserve(total);
  l.pos_w.reserve(total);
  l.pos_index.reserve(total * kPosTaps);
  l.pos_weight.reserve(total * kPosTaps);
  const int64_t side = c.num_grid_per_side();
  for (const auto& [t, h, w] : grids) {
    // Taps depend only on the row / column, so compute each axis once per grid.
    std::vector<AxisTaps> rows(h), cols(w);
    for (int64_t r = 0; r < h; ++r) rows[r] = axis_taps(r, h, side);
    for (int64_t q = 0; q < w; ++q) cols[q] = axis_taps(q, w, side);
    for (int64_t f = 0; f < t; ++f) {
      for (int64_t bh = 0; bh < h / m; ++bh) {
        for (int64_t bw = 0; bw < w / m; ++bw) {
          for (int64_t ih = 0; ih < m; ++ih) {
            for (int64_t iw = 0; iw < m; ++iw) {
              const int64_t r = bh * m + ih, q = bw * m + iw;
              l.pos_h.push_back(static_cast<int32_t>(r));
              l.pos_w.push_back(static_cast<int32_t>(q));
              for (int a = 0; a < 2; ++a) {
                for (int b = 0; b < 2; ++b) {
                  l.pos_index.push_back(static_cast<int32_t>(rows[r].tap[a] * side + cols[q].tap[b]));
                  l.pos_weight.push_back(rows[r].weight[a] * cols[q].weight[b]);
                }
              }
            }
          }
        }
      }
      l.cu_seqlens.push_back(l.cu_seqlens.back() + static_cast<int32_t>(h * w));
    }
  }

  // Separable interpolation tables: one per distinct (h, w); patches index their rows.
  l.pos_row.reserve(total);
  std::vector<int64_t> table_offset;
  for (const auto& [t, h, w] : grids) {
    size_t g = 0;
    while (g < l.pos_grids.size() && (l.pos_grids[g][0] != h || l.pos_grids[g][1] != w)) ++g;
    if (g == l.pos_grids.size()) {
      table_offset.push_back(
          table_offset.empty() ? 0 : table_offset.back() + l.pos_grids.back()[0] * l.pos_grids.back()[1]);
      l.pos_grids.push_back({h, w});
    }
    const int64_t base = table_offset[g];
    for (int64_t f = 0; f < t; ++f) {
      for (int64_t bh = 0; bh < h / m; ++bh) {
        for (int64_t bw = 0; bw < w / m; ++bw) {
          for (int64_t ih = 0; ih < m; ++ih) {
            for (int64_t iw = 0; iw < m; ++iw) {
              l.pos_row.push_back(static_cast<int32_t>(base + (bh * m + ih) * w + bw * m + iw));
            }
          }
        }
      }
    }
  }
  return l;
}

void axis_interpolation(int64_t size, int64_t side, int64_t stride, float* out) {
  std::fill(out, out + size * stride, 0.0f);
  for (int64_t i = 0; i < size; ++i) {
    const AxisTaps a = axis_taps(i, size, side);
    for (int o = 0; o < 2; ++o) out[i * stride + a.tap[o]] += a.weight[o];
  }
}

}  // namespace loom::models::qwen3_vl
