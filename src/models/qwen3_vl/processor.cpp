// Qwen3-VL prompt expansion (see processor.h).
#include "models/qwen3_vl/processor.h"

#include <cstdio>

namespace loom::models::qwen3_vl {
namespace {

std::string grid_string(const std::array<int64_t, 3>& g) {
  return "(" + std::to_string(g[0]) + ", " + std::to_string(g[1]) + ", " + std::to_string(g[2]) + ")";
}

// Merged tokens of one grid step (h*w/merge^2), or an error naming `what`.
core::Expected<int64_t> tokens_per_step(const std::array<int64_t, 3>& g, int64_t merge,
                                        const std::string& what) {
  if (merge < 1) return core::invalid_argument(what + ": merge_size must be positive");
  if (g[0] < 1 || g[1] < 1 || g[2] < 1 || g[1] > (1 << 20) || g[2] > (1 << 20) || g[0] > (1 << 20))
    return core::invalid_argument(what + " grid " + grid_string(g) + ": sides must be in [1, 2^20]");
  const int64_t hw = g[1] * g[2];
  if (hw % (merge * merge) != 0)
    return core::invalid_argument(what + " grid " + grid_string(g) +
                                  ": h*w is not a multiple of merge_size^2 (" +
                                  std::to_string(merge * merge) + ")");
  return hw / (merge * merge);
}

}  // namespace

core::Expected<ProcessorConfig> load_processor_config(const std::string& model_dir) {
  ProcessorConfig c;
  LOOM_ASSIGN_OR_RETURN(c.image, qwen_vl::load_image_processor_config(model_dir));
  LOOM_ASSIGN_OR_RETURN(c.video, load_video_processor_config(model_dir));
  return c;
}

std::string format_timestamp(double seconds) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "<%.1f seconds>", seconds);
  return buf;
}

core::Expected<std::string> video_placeholder(const VideoPrompt& video, int64_t merge_size,
                                              const PlaceholderTokens& tokens) {
  LOOM_ASSIGN_OR_RETURN(const int64_t per_step, tokens_per_step(video.grid_thw, merge_size, "video"));
  if (static_cast<int64_t>(video.timestamps.size()) != video.grid_thw[0])
    return core::invalid_argument("video grid " + grid_string(video.grid_thw) + " has " +
                                  std::to_string(video.grid_thw[0]) + " temporal steps but " +
                                  std::to_string(video.timestamps.size()) + " timestamps were given");
  std::string out;
  for (int64_t k = 0; k < video.grid_thw[0]; ++k) {
    out += format_timestamp(video.timestamps[static_cast<size_t>(k)]);
    out += tokens.vision_start;
    for (int64_t i = 0; i < per_step; ++i) out += tokens.video_pad;
    out += tokens.vision_end;
  }
  return out;
}

core::Expected<std::string> expand_prompt(const std::string& text,
                                          const std::vector<std::array<int64_t, 3>>& image_grids,
                                          const std::vector<VideoPrompt>& videos, int64_t image_merge_size,
                                          int64_t video_merge_size, const PlaceholderTokens& tokens) {
  if (tokens.image_pad.empty() || tokens.video_pad.empty())
    return core::invalid_argument("expand_prompt: empty placeholder token");
  // Count first (transformers validates the counts before expanding).
  auto count = [&](const std::string& pad) {
    size_t n = 0;
    for (size_t pos = text.find(pad); pos != std::string::npos; pos = text.find(pad, pos + pad.size())) ++n;
    return n;
  };
  const size_t n_images = count(tokens.image_pad);
  const size_t n_videos = count(tokens.video_pad);
  if (n_images != image_grids.size())
    return core::invalid_argument("expand_prompt: " + std::to_string(n_images) + " \"" + tokens.image_pad +
                                  "\" in the prompt for " + std::to_string(image_grids.size()) + " images");
  if (n_videos != videos.size())
    return core::invalid_argument("expand_prompt: " + std::to_string(n_videos) + " \"" + tokens.video_pad +
                                  "\" in the prompt for " + std::to_string(videos.size()) + " videos");

  std::string out;
  size_t pos = 0, next_image = 0, next_video = 0;
  while (true) {
    // The leftmost pad of either kind (the regex alternation transformers uses).
    const size_t hi = text.find(tokens.image_pad, pos);
    const size_t hv = text.find(tokens.video_pad, pos);
    if (hi == std::string::npos && hv == std::string::npos) break;
    const bool image = hv == std::string::npos || (hi != std::string::npos && hi <= hv);
    const size_t hit = image ? hi : hv;
    out.append(text, pos, hit - pos);
    if (image) {
      const auto& g = image_grids[next_image];
      LOOM_ASSIGN_OR_RETURN(const int64_t per_step,
                            tokens_per_step(g, image_merge_size, "image " + std::to_string(next_image)));
      for (int64_t i = 0; i < g[0] * per_step; ++i) out += tokens.image_pad;
      ++next_image;
      pos = hit + tokens.image_pad.size();
    } else {
      LOOM_ASSIGN_OR_RETURN(std::string repl,
                            video_placeholder(videos[next_video], video_merge_size, tokens));
      out += repl;
      ++next_video;
      pos = hit + tokens.video_pad.size();
    }
  }
  out.append(text, pos, std::string::npos);
  return out;
}

}  // namespace loom::models::qwen3_vl
