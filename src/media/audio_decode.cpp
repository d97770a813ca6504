// Audio probing and decoding with Debian's ffmpeg libraries: libavformat demuxes from memory through a
// custom AVIOContext (as video_decode.cpp), libavcodec decodes single-threaded, libswresample averages the
// channels and resamples to float32 mono.
//
// Fidelity target: transformers.audio_utils.load_audio (5.24). Without torchcodec it decodes with soundfile
// and resamples with python-soxr at quality "soxr_hq" (the same steps as librosa.load): mean over channels
// in float32, then resample, then pad/trim to ceil(n * target / source). We mirror each step:
//  - downmix: a custom swr matrix of 1/channels per input channel (swr's default stereo->mono matrix is
//    0.7071 * (L + R) for float output, not the mean); swr rematrixes before it resamples when the output
//    has fewer channels, so the order is librosa's;
//  - resampling: swr option resampler=soxr with swr's defaults precision=20 (soxr_quality_spec(SOXR_HQ)),
//    cutoff=0 (keep soxr's own HQ passband) and cheby=0. On the float WAV test signals (8k/22.05k/44.1k/
//    48k, mono and stereo) this equals python-soxr 1.1 "soxr_hq" bit for bit (max |diff| 0); swr's native
//    resampler (filter_size 32, cutoff 0.97) differs by up to 0.1 (README.md has the table);
//  - no resampling when the stream already has the target rate (transformers does none then);
//  - length: ceil(n_in * target / source) samples, zero-padded or trimmed.
// Integer PCM is converted to float as soundfile does (s16 / 2^15; s24 and s32 / 2^31).
//
// Truncation (the ffmpeg CLI silently decodes whatever is there; we report kCorruptData): a WAV whose data
// chunk is shorter than its header says (wav_is_truncated), a stream whose header declares a length (FLAC
// STREAMINFO, the mp3 Xing/Info frame count, MP4 sample tables) but decodes to clearly fewer samples (see
// kTruncationSlack), a bitstream error in the cut frame (AV_EF_EXPLODE), or an MP4 cut before its moov box.
// Not detectable: Ogg (vorbis, opus) and mp3 without an Xing frame cut at a page/frame boundary: they
// declare no length up front and read as a shorter, valid file.
#include "media/audio.h"

#if !LOOM_HAVE_VIDEO
// Built with LOOM_VIDEO=OFF (no ffmpeg libraries, e.g. the device bundle): audio is refused.
namespace loom::media {
bool audio_supported() {
  return false;
}
core::Expected<AudioInfo> probe_audio(std::span<const uint8_t>, const AudioLimits&) {
  return core::unsupported("this build of Loom has no audio decoding (configured with LOOM_VIDEO=OFF)");
}
core::Expected<std::vector<float>> decode_audio(std::span<const uint8_t>, int32_t, const AudioLimits&) {
  return core::unsupported("this build of Loom has no audio decoding (configured with LOOM_VIDEO=OFF)");
}
}  // namespace loom::media
#else
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/error.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include "media/av_input.h"

namespace loom::media {

bool audio_supported() {
  return true;
}

namespace {

// A header-declared length may exceed the decoded samples by codec priming/padding (mp3 ~1105 + 529,
// AAC 1024, Opus pre-skip 312 samples); only a shortfall beyond this slack counts as truncation.
constexpr int64_t kTruncationSlack = 4096;

// libavformat's WAV demuxer shrinks the data chunk to the bytes present, so a truncated WAV decodes
// silently; this reads the declared size itself. Returns true when the first "data" chunk declares more
// bytes than follow it. 0 and 0xFFFFFFFF are the "unknown length" sizes streaming writers put there.
bool wav_is_truncated(std::span<const uint8_t> b) {
  auto u32 = [&](size_t at) {
    return static_cast<uint32_t>(b[at]) | static_cast<uint32_t>(b[at + 1]) << 8 |
           static_cast<uint32_t>(b[at + 2]) << 16 | static_cast<uint32_t>(b[at + 3]) << 24;
  };
  if (b.size() < 12 || std::memcmp(b.data(), "RIFF", 4) != 0 || std::memcmp(b.data() + 8, "WAVE", 4) != 0) {
    return false;
  }
  size_t at = 12;
  while (at + 8 <= b.size()) {
    const uint32_t size = u32(at + 4);
    if (std::memcmp(b.data() + at, "data", 4) == 0) {
      if (size == 0 || size == 0xFFFFFFFFu) return false;
      return static_cast<uint64_t>(size) > b.size() - (at + 8);
    }
    at += 8 + static_cast<size_t>(size) + (size & 1);  // chunks are padded to even sizes
  }
  return false;
}

struct SwrCloser {
  void operator()(SwrContext* s) const { swr_free(&s); }
};

// An opened container with its best audio stream selected and its header checked against the limits.
class AudioDemuxer {
 public:
  static core::Expected<std::unique_ptr<AudioDemuxer>> open(std::span<const uint8_t> bytes,
                                                            const AudioLimits& limits) {
    auto d = std::unique_ptr<AudioDemuxer>(new AudioDemuxer());
    LOOM_ASSIGN_OR_RETURN(d->input_, av::MemoryInput::open(bytes, limits.max_bytes, "audio", "audio file"));
    AVFormatContext* fmt = d->input_->fmt();
    const int si = av_find_best_stream(fmt, AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
    if (si < 0) {
      return core::corrupt_data(std::string("audio: not an audio file (") + fmt->iformat->name +
                                " input with no audio stream)");
    }
    d->stream_ = fmt->streams[si];
    if (std::strcmp(fmt->iformat->name, "wav") == 0 && wav_is_truncated(bytes)) {
      return core::corrupt_data("audio: truncated WAV: the data chunk is shorter than its header declares");
    }
    const AVCodecParameters* par = d->stream_->codecpar;
    if (par->sample_rate <= 0 || par->ch_layout.nb_channels <= 0) {
      return core::corrupt_data("audio: the stream has no sample rate or no channels");
    }
    const double dur = d->header_duration_s();
    if (dur > limits.max_duration_s) {
      return core::out_of_range("audio: duration " + std::to_string(dur) + " s exceeds the limit of " +
                                std::to_string(limits.max_duration_s) + " s");
    }
    return d;
  }

  AVFormatContext* fmt() const { return input_->fmt(); }
  AVStream* stream() const { return stream_; }

  double header_duration_s() const {
    if (fmt()->duration != AV_NOPTS_VALUE && fmt()->duration > 0) {
      return static_cast<double>(fmt()->duration) / AV_TIME_BASE;
    }
    if (stream_->duration != AV_NOPTS_VALUE && stream_->duration > 0) {
      return static_cast<double>(stream_->duration) * av_q2d(stream_->time_base);
    }
    return 0.0;
  }

  // Samples (at the stream's rate) the header declares, or -1 when it declares none or only estimates
  // from the bitrate (mp3 without a Xing/Info frame).
  int64_t declared_samples() const {
    if (fmt()->duration_estimation_method == AVFMT_DURATION_FROM_BITRATE) return -1;
    if (stream_->duration == AV_NOPTS_VALUE || stream_->duration <= 0) return -1;
    return av_rescale_q(stream_->duration, stream_->time_base, AVRational{1, stream_->codecpar->sample_rate});
  }

 private:
  AudioDemuxer() = default;
  std::unique_ptr<av::MemoryInput> input_;
  AVStream* stream_ = nullptr;
};

// Downmix (mean) + resample to float mono, configured from the first decoded frame.
class MonoResampler {
 public:
  core::Status init(const AVFrame* f, int32_t target_rate) {
    AVChannelLayout in_layout{};
    if (f->ch_layout.order == AV_CHANNEL_ORDER_UNSPEC || av_channel_layout_check(&f->ch_layout) == 0) {
      av_channel_layout_default(&in_layout, f->ch_layout.nb_channels);
    } else if (av_channel_layout_copy(&in_layout, &f->ch_layout) < 0) {
      return core::resource_exhausted("audio: out of memory");
    }
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
    SwrContext* s = nullptr;
    int err = swr_alloc_set_opts2(&s, &mono, AV_SAMPLE_FMT_FLT, target_rate, &in_layout,
                                  static_cast<AVSampleFormat>(f->format), f->sample_rate, 0, nullptr);
    const int channels = in_layout.nb_channels;
    av_channel_layout_uninit(&in_layout);
    if (err < 0 || s == nullptr) {
      return core::unsupported("audio: cannot convert this sample format/layout (" + av::error_text(err) +
                               ")");
    }
    swr_.reset(s);
    // soxr at swr's defaults (precision 20 = SOXR_HQ, cutoff 0 = soxr's passband): see the file comment.
    av_opt_set(s, "resampler", "soxr", 0);
    std::vector<double> matrix(static_cast<size_t>(channels), 1.0 / channels);
    err = swr_set_matrix(s, matrix.data(), channels);
    if (err >= 0) err = swr_init(s);
    if (err < 0) return core::unsupported("audio: cannot set up the resampler (" + av::error_text(err) + ")");
    format_ = f->format;
    rate_ = f->sample_rate;
    channels_ = f->ch_layout.nb_channels;
    return core::Status::ok_status();
  }

  bool ready() const { return swr_ != nullptr; }
  bool matches(const AVFrame* f) const {
    return f->format == format_ && f->sample_rate == rate_ && f->ch_layout.nb_channels == channels_;
  }
  int32_t source_rate() const { return rate_; }

  // Converts `f` (nullptr flushes the resampler) and appends to `out`.
  core::Status push(const AVFrame* f, std::vector<float>& out) {
    const int in_samples = f ? f->nb_samples : 0;
    for (;;) {
      const int cap = std::max(swr_get_out_samples(swr_.get(), in_samples), 0) + 256;
      const size_t old = out.size();
      out.resize(old + static_cast<size_t>(cap));
      auto* dst = reinterpret_cast<uint8_t*>(out.data() + old);
      const int n =
          f ? swr_convert(swr_.get(), &dst, cap, const_cast<const uint8_t**>(f->extended_data), in_samples)
            : swr_convert(swr_.get(), &dst, cap, nullptr, 0);
      if (n < 0) {
        out.resize(old);
        return core::corrupt_data("audio: sample conversion failed (" + av::error_text(n) + ")");
      }
      out.resize(old + static_cast<size_t>(n));
      // Input is consumed in one call (buffered inside swr when cap is short); a flush repeats until empty.
      if (f != nullptr || n == 0) return core::Status::ok_status();
    }
  }

 private:
  std::unique_ptr<SwrContext, SwrCloser> swr_;
  int format_ = -1;
  int rate_ = 0;
  int channels_ = 0;
};

}  // namespace

core::Expected<AudioInfo> probe_audio(std::span<const uint8_t> bytes, const AudioLimits& limits) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<AudioDemuxer> d, AudioDemuxer::open(bytes, limits));
  const AVCodecParameters* par = d->stream()->codecpar;
  AudioInfo info;
  info.sample_rate = par->sample_rate;
  info.channels = par->ch_layout.nb_channels;
  info.duration_s = d->header_duration_s();
  info.codec = avcodec_get_name(par->codec_id);
  return info;
}

core::Expected<std::vector<float>> decode_audio(std::span<const uint8_t> bytes, int32_t target_rate,
                                                const AudioLimits& limits) {
  if (target_rate <= 0) return core::invalid_argument("audio: target rate must be positive");
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<AudioDemuxer> d, AudioDemuxer::open(bytes, limits));
  AVStream* st = d->stream();
  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  if (codec == nullptr) {
    return core::unsupported(std::string("audio: no decoder for codec ") +
                             avcodec_get_name(st->codecpar->codec_id));
  }
  std::unique_ptr<AVCodecContext, av::CodecCloser> ctx(avcodec_alloc_context3(codec));
  if (!ctx) return core::resource_exhausted("audio: out of memory");
  if (avcodec_parameters_to_context(ctx.get(), st->codecpar) < 0) {
    return core::corrupt_data("audio: invalid codec parameters");
  }
  ctx->thread_count = 1;
  ctx->pkt_timebase = st->time_base;
  ctx->err_recognition |= AV_EF_EXPLODE;  // corrupt media must fail, not decode to concealed garbage
  int err = avcodec_open2(ctx.get(), codec, nullptr);
  if (err < 0) return core::unsupported("audio: cannot open the decoder (" + av::error_text(err) + ")");

  std::unique_ptr<AVPacket, av::PacketCloser> pkt(av_packet_alloc());
  std::unique_ptr<AVFrame, av::FrameCloser> frame(av_frame_alloc());
  if (!pkt || !frame) return core::resource_exhausted("audio: out of memory");
  MonoResampler resampler;
  std::vector<float> out;
  int64_t in_samples = 0;  // decoded source samples (per channel)

  auto drain = [&]() -> core::Status {
    for (;;) {
      const int r = avcodec_receive_frame(ctx.get(), frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return core::Status::ok_status();
      if (r < 0) return core::corrupt_data("audio: decoding failed (" + av::error_text(r) + ")");
      if ((frame->flags & AV_FRAME_FLAG_CORRUPT) != 0 || frame->decode_error_flags != 0) {
        return core::corrupt_data("audio: a frame at sample " + std::to_string(in_samples) + " is corrupt");
      }
      if (frame->nb_samples > 0) {
        if (!resampler.ready()) {
          LOOM_RETURN_IF_ERROR(resampler.init(frame.get(), target_rate));
        } else if (!resampler.matches(frame.get())) {
          return core::unsupported("audio: sample rate, format or channel count changes mid-stream");
        }
        in_samples += frame->nb_samples;
        if (static_cast<double>(in_samples) > limits.max_duration_s * resampler.source_rate()) {
          return core::out_of_range("audio: longer than the limit of " +
                                    std::to_string(limits.max_duration_s) + " s");
        }
        LOOM_RETURN_IF_ERROR(resampler.push(frame.get(), out));
      }
      av_frame_unref(frame.get());
    }
  };

  for (;;) {
    err = av_read_frame(d->fmt(), pkt.get());
    if (err == AVERROR_EOF) break;
    if (err < 0) return core::corrupt_data("audio: cannot read packets (" + av::error_text(err) + ")");
    if (pkt->stream_index != st->index) {
      av_packet_unref(pkt.get());
      continue;
    }
    err = avcodec_send_packet(ctx.get(), pkt.get());
    av_packet_unref(pkt.get());
    if (err < 0) {
      return core::corrupt_data("audio: decoding failed at sample " + std::to_string(in_samples) + " (" +
                                av::error_text(err) + ")");
    }
    LOOM_RETURN_IF_ERROR(drain());
  }
  err = avcodec_send_packet(ctx.get(), nullptr);  // flush the decoder
  if (err < 0 && err != AVERROR_EOF)
    return core::corrupt_data("audio: decoding failed (" + av::error_text(err) + ")");
  LOOM_RETURN_IF_ERROR(drain());
  if (in_samples == 0) return core::invalid_argument("audio: the stream has no samples");

  const int64_t declared = d->declared_samples();
  if (declared > 0 && in_samples + kTruncationSlack < declared) {
    return core::corrupt_data("audio: truncated: the header declares " + std::to_string(declared) +
                              " samples but only " + std::to_string(in_samples) + " decode");
  }
  LOOM_RETURN_IF_ERROR(resampler.push(nullptr, out));
  const int64_t src_rate = resampler.source_rate();
  if (src_rate != target_rate) {
    // transformers: pad/trim to ceil(n * target / source).
    const int64_t want = (in_samples * target_rate + src_rate - 1) / src_rate;
    out.resize(static_cast<size_t>(want), 0.0f);
  }
  return out;
}

}  // namespace loom::media
#endif  // LOOM_HAVE_VIDEO
