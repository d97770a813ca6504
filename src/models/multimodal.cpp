#include "models/multimodal.h"

#include <utility>

namespace loom::models {

core::Expected<std::vector<media::VideoFrame>> decode_item_frames(const MediaItem& item,
                                                                  std::span<const int64_t> indices,
                                                                  const media::VideoLimits& limits) {
  if (!item.is_video()) return core::invalid_argument("'" + item.where + "' is not a video");
  if (item.decode_frames) {
    auto images = item.decode_frames(indices);
    if (!images.ok()) return images.status().with_context(item.where);
    if (images->size() != indices.size())
      return core::internal_error(item.where + ": the frame decoder returned the wrong number of frames");
    std::vector<media::VideoFrame> out(indices.size());
    for (size_t i = 0; i < out.size(); ++i) {
      out[i].index = indices[i];
      out[i].image = std::move((*images)[i]);
    }
    return out;
  }
  if (item.video_bytes) {
    auto frames = media::decode_video_frames(*item.video_bytes, indices, limits);
    if (!frames.ok()) return frames.status().with_context(item.where);
    return std::move(*frames);
  }
  std::vector<media::VideoFrame> out;
  out.reserve(indices.size());
  for (int64_t idx : indices) {
    if (idx < 0)
      return core::invalid_argument("'" + item.where + "': negative frame index " + std::to_string(idx));
    if (idx >= static_cast<int64_t>(item.frames.size()))
      return core::out_of_range("'" + item.where + "': frame index " + std::to_string(idx) +
                                " is past the last of its " + std::to_string(item.frames.size()) + " frames");
    media::VideoFrame f;
    f.index = idx;
    f.image = item.frames[static_cast<size_t>(idx)];
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace loom::models
