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
#include "models/multimodal.h"
#include "server/openai_protocol.h"

namespace loom::server {

// Server-wide media settings (CLI: --allowed-local-media-path, --limit-mm-per-prompt).
struct MultimodalConfig {
  media::MediaPolicy policy;        // allowed local directory, http(s), image byte / pixel limits
  media::VideoLimits video_limits;  // bytes, pixels per frame, frames decoded
  MediaLimits per_prompt;           // images / videos per request
};

// One image or video of a request.
struct MediaItem : models::MediaItem {
  // Where it came from: messages[message_index].content[part_index]; `where` (the base's) is that path
  // as text ("messages[1].content[2]"), used in error messages.
  int32_t message_index = 0;
  int32_t part_index = 0;
  // Source URL(s) as sent: one for an image or a video file, one per frame for a frame-list video.
  std::vector<std::string> urls;
  // The base holds the media: kImage the decoded RGB8 pixels (EXIF orientation applied, as
  // transformers' load_image); a video file its encoded bytes (shared) and probe_video's result, whose
  // frames models::decode_item_frames decodes once the processor has chosen the indices; a frame list
  // ({"type": "video", "video": [url, ...]}) every frame decoded (all one size, as transformers stacks
  // them), with video_info = width/height, num_frames = list length, fps 0 and duration 0 (a list of
  // images carries no timing; transformers passes metadata=None for it too).
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

}  // namespace loom::server
