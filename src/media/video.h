// Video decoding: encoded bytes (mp4/mov, webm/mkv, anything Debian's libavformat demuxes) -> RGB8 frames,
// and Qwen2-VL / Qwen2.5-VL frame sampling (which frames of a video the processor keeps). Pixel parity with
// the ffmpeg CLI is explained in video_decode.cpp; the sampling formula in video_sampling.cpp.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"
#include "media/image.h"

namespace loom::media {

// False in builds configured with LOOM_VIDEO=OFF (no ffmpeg libraries): probe and decode then
// return Unsupported.
bool video_supported();

struct VideoFrame {
  int64_t index = 0;         // position in decoder output order (presentation order), from 0
  double timestamp_s = 0.0;  // presentation time minus the stream's start time
  Image image;               // RGB8 at the frame's display width x height (no resizing)
};

struct VideoInfo {
  int32_t width = 0;
  int32_t height = 0;
  double fps = 0.0;         // the stream's average frame rate (avg_frame_rate; r_frame_rate if unset)
  int64_t num_frames = 0;   // counted video packets (exact, as torchcodec's seek_mode="exact")
  double duration_s = 0.0;  // container duration; num_frames / fps when the container has none
};

// Per-request guards. Bytes are checked before demuxing; pixels from the stream header before any
// decoder is opened; frames count packets while probing and frames while decoding.
struct VideoLimits {
  int64_t max_bytes = 512 << 20;
  int64_t max_frames_decoded = 100000;
  int64_t max_pixels_per_frame = 4096LL * 4096;
};

// Errors: kInvalidArgument (empty), kUnsupported (no video stream / no decoder), kCorruptData (not a
// container libavformat recognises, corrupt or truncated data), kOutOfRange (over `limits`).
core::Expected<VideoInfo> probe_video(std::span<const uint8_t> bytes, const VideoLimits& limits = {});

// Decodes exactly the frames at `indices` (positions in decoder output order, counting from 0, the
// `n` of ffmpeg's select filter and PyAV's enumerate(container.decode(video=0))), converted to RGB8 with
// libswscale as the ffmpeg CLI's auto-inserted scale filter does (see video_decode.cpp). Returns them
// in the order of `indices`; duplicates allowed. Decoding stops after the largest index.
// Errors as probe_video, plus kInvalidArgument (negative index) and kOutOfRange (an index at or past
// the number of frames the stream decodes to).
core::Expected<std::vector<VideoFrame>> decode_video_frames(std::span<const uint8_t> bytes,
                                                            std::span<const int64_t> indices,
                                                            const VideoLimits& limits = {});

// Qwen2VLVideoProcessor.sample_frames (transformers 5.24). num_frames > 0 selects num_frames mode
// (rounded to a multiple of temporal_patch_size); otherwise fps mode:
//   max_frames' = floor(min(max_frames, total) / tps) * tps
//   n = floor(min(max(total / video_fps * fps, min_frames), max_frames', total) / tps) * tps
// indices = torch.arange(0, total, total / n).int() (float32 values, truncated), minus an index equal
// to total that float rounding can add (transformers keeps it; its PyAV loader never finds that frame).
struct FrameSampling {
  double fps = 2.0;
  int64_t min_frames = 4;
  int64_t max_frames = 768;
  int32_t temporal_patch_size = 2;
  int64_t num_frames = 0;  // 0: sample by fps
};

// Errors: kInvalidArgument (non-positive fps / sizes, or a video too short to give one temporal
// patch: transformers raises ZeroDivisionError there), kOutOfRange (num_frames over the video's frames).
core::Expected<std::vector<int64_t>> qwen_sample_frame_indices(const VideoInfo& info, const FrameSampling& s);

// transformers' VideoMetadata.timestamps: index / fps for each sampled index.
std::vector<double> frame_timestamps(const VideoInfo& info, std::span<const int64_t> indices);

}  // namespace loom::media
