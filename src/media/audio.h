// Audio decoding: encoded bytes (wav, flac, mp3, ogg/vorbis, opus, m4a/aac: anything Debian's libavformat
// demuxes and libavcodec decodes) -> mono float PCM at a target rate, as transformers' audio loading
// produces it (transformers.audio_utils.load_audio, soundfile backend = librosa.load: mean over channels,
// soxr "HQ" resampling, length ceil(n * target / source)). How the resampler is configured and how close
// it is to transformers: audio_decode.cpp and README.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom::media {

// False in builds configured with LOOM_VIDEO=OFF (no ffmpeg libraries): probe and decode then
// return Unsupported.
bool audio_supported();

struct AudioInfo {
  int32_t sample_rate = 0;  // of the source stream
  int32_t channels = 0;
  double duration_s = 0.0;  // container/stream duration (from the header; may be an estimate for mp3)
  std::string codec;        // libavcodec's short name ("pcm_s16le", "mp3", "opus", ...)
};

// Per-request guards. Bytes are checked before demuxing; the duration from the header when it has one,
// and always from the samples actually decoded (a header can lie).
struct AudioLimits {
  int64_t max_bytes = 256 << 20;
  double max_duration_s = 600.0;
};

// Errors: kInvalidArgument (empty input), kCorruptData (not a container libavformat recognises, no audio
// stream, corrupt or truncated data), kUnsupported (no decoder for the codec), kOutOfRange (over `limits`).
core::Expected<AudioInfo> probe_audio(std::span<const uint8_t> bytes, const AudioLimits& limits = {});

// Decodes the best audio stream to mono float32 at `target_rate` Hz: channels averaged, then resampled with
// libswresample's soxr engine at its defaults (precision 20 bits = soxr HQ, soxr's own passband), which is
// bit-identical to librosa / transformers on the float WAV test signals. No resampling when the stream is
// already at target_rate (transformers does none either). When resampling, the result has exactly
// ceil(n * target_rate / source_rate) samples (zero-padded or trimmed, as transformers does).
// Errors as probe_audio, plus kInvalidArgument for a non-positive target_rate or a stream with no samples,
// and kCorruptData when fewer samples decode than the header declares (a truncated file).
core::Expected<std::vector<float>> decode_audio(std::span<const uint8_t> bytes, int32_t target_rate = 16000,
                                                const AudioLimits& limits = {});

}  // namespace loom::media
