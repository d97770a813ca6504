#include "models/qwen_vl/vision_window.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/check.h"

namespace loom::models::qwen_vl {

core::Expected<VisionLayout> make_vision_layout(const VisionConfig& config,
                                                std::span<const std::array<int64_t, 3>> grids) {
  const int64_t m = config.spatial_merge_size;
  const int64_t unit = config.merge_unit();
  const int64_t win = config.window_units();
  if (grids.empty()) return core::invalid_argument("vision forward needs at least one grid");
  VisionLayout out;
  for (size_t i = 0; i < grids.size(); ++i) {
    const auto [t, h, w] = grids[i];
    if (t <= 0 || h <= 0 || w <= 0 || h % m != 0 || w % m != 0) {
      return core::invalid_argument("grid " + std::to_string(i) + " (" + std::to_string(t) + ", " +
                                    std::to_string(h) + ", " + std::to_string(w) +
                                    "): entries must be positive and h, w multiples of spatial_merge_size " +
                                    std::to_string(m));
    }
    out.num_patches += t * h * w;
    if (out.num_patches > std::numeric_limits<int32_t>::max()) {
      return core::out_of_range("too many vision patches: " + std::to_string(out.num_patches));
    }
  }
  out.num_units = out.num_patches / unit;

  // Positions in processor order first: (h, w) of each patch.
  std::vector<int32_t> ph, pw;
  ph.reserve(out.num_patches);
  pw.reserve(out.num_patches);
  for (const auto& [t, h, w] : grids) {
    for (int64_t f = 0; f < t; ++f) {
      for (int64_t bh = 0; bh < h / m; ++bh) {
        for (int64_t bw = 0; bw < w / m; ++bw) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < m; ++j) {
              ph.push_back(static_cast<int32_t>(bh * m + i));
              pw.push_back(static_cast<int32_t>(bw * m + j));
            }
          }
        }
      }
    }
  }

  // Window order: per image, per frame, windows row-major, units inside a window row-major.
  out.window_index.reserve(out.num_units);
  out.cu_window_seqlens.push_back(0);
  out.cu_seqlens.push_back(0);
  int64_t unit_base = 0;
  for (const auto& [t, h, w] : grids) {
    const int64_t gh = h / m, gw = w / m;  // merged grid
    const int64_t nwh = (gh + win - 1) / win, nww = (gw + win - 1) / win;
    for (int64_t f = 0; f < t; ++f) {
      const int64_t frame_base = unit_base + f * gh * gw;
      for (int64_t wy = 0; wy < nwh; ++wy) {
        for (int64_t wx = 0; wx < nww; ++wx) {
          int64_t count = 0;
          for (int64_t y = wy * win; y < std::min(gh, (wy + 1) * win); ++y) {
            for (int64_t x = wx * win; x < std::min(gw, (wx + 1) * win); ++x) {
              out.window_index.push_back(static_cast<int32_t>(frame_base + y * gw + x));
              ++count;
            }
          }
          // count > 0 always: window starts lie inside the grid.
          out.cu_window_seqlens.push_back(out.cu_window_seqlens.back() + static_cast<int32_t>(count * unit));
        }
      }
      out.cu_seqlens.push_back(out.cu_seqlens.back() + static_cast<int32_t>(h * w));
    }
    unit_base += t * gh * gw;
  }
  LOOM_CHECK(static_cast<int64_t>(out.window_index.size()) == out.num_units);
  LOOM_CHECK(out.cu_window_seqlens.back() == out.num_patches);

  out.pos_h.resize(out.num_patches);
  out.pos_w.resize(out.num_patches);
  for (int64_t j = 0; j < out.num_units; ++j) {
    const int64_t src = out.window_index[j];
    for (int64_t k = 0; k < unit; ++k) {
      out.pos_h[j * unit + k] = ph[src * unit + k];
      out.pos_w[j * unit + k] = pw[src * unit + k];
    }
  }
  return out;
}

}  // namespace loom::models::qwen_vl
