// Multimodal prompts: what the server hands a vision-language model (decoded media in order of
// appearance), and what the model hands the engine (the expanded prompt, its M-RoPE positions and
// the encoder embeddings of each placeholder run).
//
//   prompt text from the chat template, one placeholder per item ("<|image_pad|>", "<|video_pad|>")
//     -> family processor: resize / patchify each item, expand its placeholder into the item's
//        token count (in the text, as transformers' processors do), tokenize
//     -> position ids (M-RoPE rows t, h, w and the rope delta for decoding)
//     -> encoder: embeddings [tokens, hidden] per item (+ DeepStack rows for Qwen3-VL)
//   The engine then replaces the token embeddings of each span during prefill (chunks may cut a
//   span anywhere) and positions decode tokens at index + rope_delta.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "media/image.h"
#include "media/video.h"

namespace loom::models {

// One decoded image or video of a request.
struct MediaItem {
  enum class Kind { kImage, kVideo };
  Kind kind = Kind::kImage;
  media::Image image;  // kImage
  // kVideo from a file or URL: the encoded bytes and their probe; the family's processor samples
  // the frames it needs and decodes only those.
  std::shared_ptr<const std::vector<uint8_t>> video_bytes;
  media::VideoInfo video_info;
  // kVideo given as a list of frames (all used, in order; equal sizes). frames_fps is the rate
  // they were taken at, when the request says so (0: unknown; transformers then assumes 24).
  std::vector<media::Image> frames;
  double frames_fps = 0.0;
  // kVideo: when set, decodes the frames at the given indices instead of video_bytes (callers with
  // their own decoder; the GPU tests use it with pre-decoded frames, as their build has no ffmpeg).
  std::function<core::Expected<std::vector<media::Image>>(std::span<const int64_t>)> decode_frames;
  std::string where;  // the request location, for error messages ("messages[0].content[1]")

  bool is_image() const { return kind == Kind::kImage; }
  bool is_video() const { return kind == Kind::kVideo; }
  bool is_frame_list() const { return kind == Kind::kVideo && !video_bytes && !decode_frames; }
};

// The frames at `indices` (positions in presentation order, from 0) of a video item, in the order of
// `indices`: decoded from video_bytes (media::decode_video_frames) or by decode_frames, or taken from
// a frame list (timestamp 0: a list carries no timing). Errors, prefixed with item.where:
// InvalidArgument (not a video, a negative index), OutOfRange (past the last frame), and the decoder's.
core::Expected<std::vector<media::VideoFrame>> decode_item_frames(const MediaItem& item,
                                                                  std::span<const int64_t> indices,
                                                                  const media::VideoLimits& limits = {});

// One run of placeholder tokens and the encoder rows that replace their embeddings.
struct MultimodalSpan {
  int64_t offset = 0;                   // first token of the run in the prompt
  int64_t length = 0;                   // tokens (= embeds rows)
  core::Tensor embeds;                  // [length, hidden], host, the backend's activation dtype
  std::vector<core::Tensor> deepstack;  // Qwen3-VL: per DeepStack layer, [length, hidden]
};

struct MultimodalPrompt {
  std::vector<int32_t> token_ids;        // placeholders expanded
  std::vector<int32_t> mrope_positions;  // [3 * tokens]: t row, h row, w row
  int64_t rope_delta = 0;                // decode token at index p sits at p + rope_delta
  std::vector<MultimodalSpan> spans;     // in prompt order, non-overlapping
  // Per-item statistics for logs and benchmarks.
  double preprocess_ms = 0.0, encode_ms = 0.0;
  int32_t encoder_cache_hits = 0;  // items whose encoder output came from the encoder cache
};

}  // namespace loom::models
