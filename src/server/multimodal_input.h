// The media of a chat request, resolved and decoded: every image / video content part of the validated
// messages, in conversation order, as typed items the model's processor consumes (resize, patchify,
// frame sampling and placeholder expansion happen there, not here). Loading follows the server's
// policy (media/media_source.h: data: URLs, local files only under the allowed directory, http(s)
// refused) and its per-prompt limits (vLLM's --limit-mm-per-prompt).
//
// Link note: this file's implementation needs loom_media (decoders); see README.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "media/image.h"
#include "media/media_source.h"
#include "media/video.h"
#include "server/openai_protocol.h"

namespace loom::server {

// Server-wide media settings (CLI: --allowed-local-media-path, --limit-mm-per-prompt).
struct MultimodalConfig {
  media::MediaPolicy policy;        // allowed local directory, http(s), image byte / pixel limits
  media::VideoLimits video_limits;  // bytes, pixels per frame, frames decoded
  MediaLimits per_prompt;           // images / videos per request
};

// One image or video of a request.
struct MediaItem {
  enum Kind { kImage, kVideo };
  Kind kind = kImage;
  // Where it came from: messages[message_index].content[part_index]; `location` is that path as text
  // ("messages[1].content[2]"), used in error messages.
  int32_t message_index = 0;
  int32_t part_index = 0;
  std::string location;
  // Source URL(s) as sent: one for an image or a video file, one per frame for a frame-list video.
  std::vector<std::string> urls;

  // kImage: decoded RGB8 pixels (EXIF orientation applied, as transformers' load_image).
  media::Image image;

  // kVideo given as one file (video_url, or {"type": "video", "video"|"url": "..."}): its encoded bytes
  // (shared, so copying an item never copies the video) and the probe. Frames are decoded on demand by
  // decode_video_item_frames once the processor has chosen the indices (media::qwen_sample_frame_indices).
  std::shared_ptr<const std::vector<uint8_t>> video_bytes;
  // kVideo: for a file, probe_video's result; for a frame list, width/height of the frames,
  // num_frames = list length, fps = 0 and duration_s = 0 (a list of images carries no timing;
  // transformers passes metadata=None for it too).
  media::VideoInfo video_info;
  // kVideo given as a list of frames ({"type": "video", "video": [url, ...]}): every frame, decoded
  // (each is an image; all share one size, as transformers stacks them into one array).
  std::vector<media::Image> frames;

  bool is_image() const { return kind == kImage; }
  bool is_video() const { return kind == kVideo; }
  bool is_frame_list() const { return kind == kVideo && !video_bytes; }
};

struct MultimodalInputs {
  std::vector<MediaItem> items;  // conversation order: messages in order, parts in order
  int32_t num_images() const;
  int32_t num_videos() const;
  bool empty() const { return items.empty(); }
};

// Walks req.messages (already validated by parse_chat_request) and resolves every media part:
// checks the per-prompt limits first (before loading anything), then loads each source through
// media::load_media_bytes with config.policy, decodes images (media::decode_image) and probes videos
// (media::probe_video; frame lists are decoded as images). Text parts are skipped; audio parts are
// Unsupported (not loaded yet). Every failure the request caused is InvalidArgument naming the part
// ("'messages[1].content[2].image_url.url': ..."); server-side read errors stay IoError.
core::Expected<MultimodalInputs> load_multimodal_inputs(const ChatRequest& req,
                                                        const MultimodalConfig& config);

// The frames at `indices` of a video item (positions counted from 0 in presentation order, as
// media::decode_video_frames), in the order of `indices`. For a file, decodes them now (ffmpeg); for a
// frame list, copies the listed frames (timestamp_s = 0: a frame list has no timing).
// Errors: InvalidArgument (not a video, negative index), OutOfRange (index past the last frame), and
// decode_video_frames' errors, each prefixed with the item's location.
core::Expected<std::vector<media::VideoFrame>> decode_video_item_frames(
    const MediaItem& item, std::span<const int64_t> indices, const media::VideoLimits& limits = {});

}  // namespace loom::server
