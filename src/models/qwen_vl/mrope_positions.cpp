// M-RoPE position ids (see mrope_positions.h for the rules and the transformers functions mirrored).
#include "models/qwen_vl/mrope_positions.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "core/check.h"

namespace loom::models::qwen_vl {
namespace {

constexpr int64_t kMaxPosition = std::numeric_limits<int32_t>::max();

enum class Modality { kText, kImage, kVideo };

const char* modality_name(Modality m) {
  return m == Modality::kImage ? "image" : "video";
}

std::string grid_string(const VisionGrid& g) {
  return "(" + std::to_string(g.t) + ", " + std::to_string(g.h) + ", " + std::to_string(g.w) + ")";
}

core::Status check_grid(const VisionGrid& g, int64_t merge, Modality m, size_t index) {
  const std::string what =
      std::string(modality_name(m)) + " grid " + std::to_string(index) + " " + grid_string(g);
  if (g.t < 1 || g.h < 1 || g.w < 1) return core::invalid_argument(what + ": every side must be positive");
  if (g.h % merge != 0 || g.w % merge != 0) {
    return core::invalid_argument(what + ": h and w must be multiples of spatial_merge_size " +
                                  std::to_string(merge));
  }
  return core::Status::ok_status();
}

// Tokens the merged grid takes, or -1 when that exceeds `limit` (< 2^31; no overflow on absurd grids).
int64_t merged_tokens(const VisionGrid& g, int64_t merge, int64_t limit) {
  const int64_t factors[3] = {g.t, g.h / merge, g.w / merge};
  int64_t n = 1;
  for (int64_t f : factors) {
    if (f > limit) return -1;
    n *= f;  // n <= limit and f <= limit < 2^31 before this: no overflow
    if (n > limit) return -1;
  }
  return n;
}

}  // namespace

core::Expected<MropePositions> mrope_positions(std::span<const int32_t> input_ids,
                                               std::span<const VisionGrid> image_grids,
                                               std::span<const VisionGrid> video_grids,
                                               std::span<const double> second_per_grid_ts,
                                               const MropeConfig& cfg) {
  const int64_t n = static_cast<int64_t>(input_ids.size());
  if (n == 0) return core::invalid_argument("mrope_positions: input_ids is empty");
  if (n > kMaxPosition)
    return core::out_of_range("mrope_positions: " + std::to_string(n) + " tokens is too many");
  if (cfg.spatial_merge_size < 1) {
    return core::invalid_argument("mrope_positions: spatial_merge_size must be >= 1, got " +
                                  std::to_string(cfg.spatial_merge_size));
  }
  if (!std::isfinite(cfg.tokens_per_second) || cfg.tokens_per_second < 0) {
    return core::invalid_argument("mrope_positions: tokens_per_second must be finite and >= 0, got " +
                                  std::to_string(cfg.tokens_per_second));
  }
  if (!second_per_grid_ts.empty() && second_per_grid_ts.size() != video_grids.size()) {
    return core::invalid_argument("mrope_positions: " + std::to_string(second_per_grid_ts.size()) +
                                  " second_per_grid_ts for " + std::to_string(video_grids.size()) +
                                  " videos (give one per video, or none for 1.0 each)");
  }
  for (size_t i = 0; i < second_per_grid_ts.size(); ++i) {
    if (!std::isfinite(second_per_grid_ts[i]) || second_per_grid_ts[i] < 0) {
      return core::invalid_argument("mrope_positions: second_per_grid_ts[" + std::to_string(i) +
                                    "] must be finite and >= 0, got " +
                                    std::to_string(second_per_grid_ts[i]));
    }
  }
  const int64_t merge = cfg.spatial_merge_size;
  for (size_t i = 0; i < image_grids.size(); ++i)
    LOOM_RETURN_IF_ERROR(check_grid(image_grids[i], merge, Modality::kImage, i));
  for (size_t i = 0; i < video_grids.size(); ++i)
    LOOM_RETURN_IF_ERROR(check_grid(video_grids[i], merge, Modality::kVideo, i));

  auto modality_of = [&](int32_t id) {
    if (id == cfg.image_token_id) return Modality::kImage;
    if (id == cfg.video_token_id) return Modality::kVideo;
    return Modality::kText;
  };

  MropePositions out;
  out.t.resize(n);
  out.h.resize(n);
  out.w.resize(n);
  size_t next_image = 0, next_video = 0;
  int64_t pos = 0;      // transformers' current_pos: where the next run starts
  int64_t max_pos = 0;  // over all three rows, for rope_delta
  // Runs of equal modality (itertools.groupby over mm_token_type_ids in transformers).
  for (int64_t start = 0; start < n;) {
    const Modality m = modality_of(input_ids[start]);
    int64_t end = start + 1;
    while (end < n && modality_of(input_ids[end]) == m) ++end;
    const int64_t len = end - start;

    if (m == Modality::kText) {
      if (pos + len - 1 > kMaxPosition)
        return core::out_of_range("mrope_positions: text position exceeds int32");
      for (int64_t i = 0; i < len; ++i) {
        const auto p = static_cast<int32_t>(pos + i);
        out.t[start + i] = out.h[start + i] = out.w[start + i] = p;
      }
      max_pos = std::max(max_pos, pos + len - 1);
      pos += len;
      start = end;
      continue;
    }

    const bool image = m == Modality::kImage;
    const std::span<const VisionGrid> grids = image ? image_grids : video_grids;
    size_t& next = image ? next_image : next_video;
    const std::string run_desc = std::string(modality_name(m)) + " token run at index " +
                                 std::to_string(start) + " (" + std::to_string(len) + " tokens)";
    if (next >= grids.size()) {
      return core::invalid_argument("mrope_positions: " + run_desc + " but only " +
                                    std::to_string(grids.size()) + " " + modality_name(m) +
                                    " grids were given");
    }
    const VisionGrid& g = grids[next];
    const int64_t want = merged_tokens(g, merge, kMaxPosition);
    if (want != len) {
      return core::invalid_argument(
          "mrope_positions: " + run_desc + " but " + modality_name(m) + " grid " + std::to_string(next) +
          " " + grid_string(g) + " with spatial_merge_size " + std::to_string(merge) + " needs " +
          (want < 0 ? "more than " + std::to_string(kMaxPosition) : std::to_string(want)) +
          " (adjacent items need text between them)");
    }
    // time_interval in float32, as transformers computes it: tokens_per_second (a Python number) times
    // a float32 second_per_grid_ts element; arange(T) * interval in float32, then .long() truncates.
    float interval = 1.0f;
    if (!image && cfg.tokens_per_second > 0) {
      const float spg = second_per_grid_ts.empty() ? 1.0f : static_cast<float>(second_per_grid_ts[next]);
      interval = static_cast<float>(cfg.tokens_per_second) * spg;
    }
    ++next;

    const int64_t gh = g.h / merge, gw = g.w / merge;
    const float last_t = static_cast<float>(g.t - 1) * interval;
    if (static_cast<double>(last_t) + static_cast<double>(pos) > static_cast<double>(kMaxPosition) ||
        pos + std::max(gh, gw) > kMaxPosition) {
      return core::out_of_range("mrope_positions: position of " + run_desc + " exceeds int32");
    }
    int64_t idx = start;
    for (int64_t k = 0; k < g.t; ++k) {
      const auto tp = static_cast<int32_t>(pos + static_cast<int64_t>(static_cast<float>(k) * interval));
      max_pos = std::max<int64_t>(max_pos, tp);
      for (int64_t i = 0; i < gh; ++i) {
        for (int64_t j = 0; j < gw; ++j, ++idx) {
          out.t[idx] = tp;
          out.h[idx] = static_cast<int32_t>(pos + i);
          out.w[idx] = static_cast<int32_t>(pos + j);
        }
      }
    }
    LOOM_CHECK(idx == end) << "filled " << idx - start << " of " << len;
    max_pos = std::max(max_pos, pos + std::max(gh, gw) - 1);
    pos += std::max(gh, gw);
    start = end;
  }

  if (next_image != image_grids.size() || next_video != video_grids.size()) {
    return core::invalid_argument("mrope_positions: " + std::to_string(image_grids.size()) + " image and " +
                                  std::to_string(video_grids.size()) +
                                  " video grids given, but input_ids has " + std::to_string(next_image) +
                                  " image and " + std::to_string(next_video) + " video token runs");
  }
  out.rope_delta = max_pos + 1 - n;
  return out;
}

core::Expected<MropePositions> mrope_decode_positions(int64_t first_index, int64_t count,
                                                      int64_t rope_delta) {
  if (first_index < 0 || count < 0) {
    return core::invalid_argument("mrope_decode_positions: first_index and count must be >= 0, got " +
                                  std::to_string(first_index) + " and " + std::to_string(count));
  }
  MropePositions out;
  out.rope_delta = rope_delta;
  if (count == 0) return out;
  const int64_t lo = first_index + rope_delta;
  if (lo < 0 || count > kMaxPosition || lo > kMaxPosition - (count - 1)) {
    return core::out_of_range("mrope_decode_positions: positions [" + std::to_string(lo) + ", " +
                              std::to_string(lo) + " + " + std::to_string(count) + ") do not fit in int32");
  }
  out.t.resize(count);
  for (int64_t i = 0; i < count; ++i) out.t[i] = static_cast<int32_t>(lo + i);
  out.h = out.t;
  out.w = out.t;
  return out;
}

}  // namespace loom::models::qwen_vl
