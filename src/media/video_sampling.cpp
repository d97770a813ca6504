// Qwen2-VL / Qwen2.5-VL frame sampling, index for index as transformers 5.24's
// Qwen2VLVideoProcessor.sample_frames (tools/reference/make_video_fixtures.py records its output; the
// tests compare every case, errors included).
#include <algorithm>
#include <cmath>
#include <string>

#include "media/video.h"

namespace loom::media {
namespace {

// torch.arange(0, total, step).int() with a Python-float step: the default dtype is float32, the CPU
// kernel computes each value as double(i * step) and stores it as float32; .int() truncates. The length
// is ceil(total / step) computed in double (it can exceed round(total / step) by one).
std::vector<int64_t> torch_arange_int(int64_t total, double step) {
  const double len_d = std::ceil(static_cast<double>(total) / step);
  const auto len = static_cast<int64_t>(len_d);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(len));
  for (int64_t i = 0; i < len; ++i) {
    const float v = static_cast<float>(step * static_cast<double>(i));
    const auto idx = static_cast<int64_t>(static_cast<int32_t>(v));
    // ceil() can add an element whose float32 value rounds up to `total` (359 frames at 29.97 fps
    // gives 23 indices ending in 359): transformers passes it on, and its PyAV loader simply never
    // finds that frame (torchcodec raises). We drop it, as PyAV's loader effectively does.
    if (idx < total) out.push_back(idx);
  }
  return out;
}

}  // namespace

core::Expected<std::vector<int64_t>> qwen_sample_frame_indices(const VideoInfo& info,
                                                               const FrameSampling& s) {
  const int64_t total = info.num_frames;
  if (total <= 0) return core::invalid_argument("video has no frames to sample");
  if (s.temporal_patch_size <= 0) return core::invalid_argument("temporal_patch_size must be positive");
  const double tps = s.temporal_patch_size;
  double num = 0.0;
  if (s.num_frames > 0) {
    // Python round(): half to even, which nearbyint gives in the default rounding mode.
    num = std::nearbyint(static_cast<double>(s.num_frames) / tps) * tps;
  } else {
    if (!(s.fps > 0.0) || !std::isfinite(s.fps)) {
      return core::invalid_argument("sampling fps must be positive, got " + std::to_string(s.fps));
    }
    if (!(info.fps > 0.0) || !std::isfinite(info.fps)) {
      return core::invalid_argument("video has no frame rate; sampling by fps needs one");
    }
    if (s.min_frames < 0 || s.max_frames < 0) return core::invalid_argument("min/max frames must be >= 0");
    const double max_frames = std::floor(static_cast<double>(std::min(s.max_frames, total)) / tps) * tps;
    double n = static_cast<double>(total) / info.fps * s.fps;
    n = std::max(n, static_cast<double>(s.min_frames));
    n = std::min({n, max_frames, static_cast<double>(total)});
    num = std::floor(n / tps) * tps;
  }
  if (num > static_cast<double>(total)) {
    return core::out_of_range("cannot sample " + std::to_string(static_cast<int64_t>(num)) +
                              " frames from a video of " + std::to_string(total) + " frames");
  }
  if (num <= 0.0) {
    return core::invalid_argument("video of " + std::to_string(total) +
                                  " frames is too short for one temporal patch of " +
                                  std::to_string(s.temporal_patch_size) + " frames");
  }
  return torch_arange_int(total, static_cast<double>(total) / num);
}

std::vector<double> frame_timestamps(const VideoInfo& info, std::span<const int64_t> indices) {
  std::vector<double> out;
  out.reserve(indices.size());
  for (int64_t i : indices) out.push_back(info.fps > 0.0 ? static_cast<double>(i) / info.fps : 0.0);
  return out;
}

}  // namespace loom::media
