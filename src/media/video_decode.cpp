// Video probing and decoding with Debian's ffmpeg libraries (libavformat demuxes from memory through a
// custom AVIOContext, libavcodec decodes single-threaded, libswscale converts to rgb24).
//
// Pixel parity: the reference is the ffmpeg CLI (`-vf select=eq(n\,K) -vsync 0 -pix_fmt rgb24`), whose
// auto-inserted scale filter (libavfilter vf_scale, ffmpeg 5.1) converts with libswscale using
// flags=bicubic (the CLI's default sws_flags), src_v_chr_pos=128 for yuv420p input (MPEG-2 chroma siting,
// vf_scale's default) and, per frame, the frame's colour matrix (sws_getCoefficients(frame->colorspace))
// and range (full when the frame says AVCOL_RANGE_JPEG). RgbConverter mirrors those settings, so the
// output equals the CLI's byte for byte (tests/media_video checks every fixture). Which of them the
// fixtures pin down: bicubic (bilinear changes ~70% of the bytes of the odd-width mpeg4 clip) and the
// per-frame matrix (the bt709 clip fails with the default BT.601 table); the chroma siting and the
// explicit range do not change any fixture (full-range streams decode to yuvj formats, whose range
// libswscale already knows) and are kept to follow vf_scale.
#include "media/video.h"

#if !LOOM_HAVE_VIDEO
// Built with LOOM_VIDEO=OFF (no ffmpeg libraries, e.g. the device bundle): videos are refused.
namespace loom::media {
bool video_supported() {
  return false;
}
core::Expected<VideoInfo> probe_video(std::span<const uint8_t>, const VideoLimits&) {
  return core::unsupported("this build of Loom has no video decoding (configured with LOOM_VIDEO=OFF)");
}
core::Expected<std::vector<VideoFrame>> decode_video_frames(std::span<const uint8_t>,
                                                            std::span<const int64_t>, const VideoLimits&) {
  return core::unsupported("this build of Loom has no video decoding (configured with LOOM_VIDEO=OFF)");
}
}  // namespace loom::media
#else
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "core/check.h"
#include "media/av_input.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/error.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

namespace loom::media {

bool video_supported() {
  return true;
}

namespace {

struct SwsCloser {
  void operator()(SwsContext* s) const { sws_freeContext(s); }
};

// An opened container with its best video stream selected and checked against the limits.
class Demuxer {
 public:
  static core::Expected<std::unique_ptr<Demuxer>> open(std::span<const uint8_t> bytes,
                                                       const VideoLimits& limits) {
    auto d = std::unique_ptr<Demuxer>(new Demuxer());
    LOOM_ASSIGN_OR_RETURN(d->input_, av::MemoryInput::open(bytes, limits.max_bytes, "video", "container"));
    AVFormatContext* fmt = d->input_->fmt();
    const int si = av_find_best_stream(fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    if (si < 0) return core::unsupported("video: the container has no video stream");
    d->stream_ = fmt->streams[si];
    const AVCodecParameters* par = d->stream_->codecpar;
    if (par->width <= 0 || par->height <= 0) {
      return core::corrupt_data("video: stream has no frame size");
    }
    const int64_t pixels = static_cast<int64_t>(par->width) * par->height;
    if (pixels > limits.max_pixels_per_frame) {
      return core::out_of_range("video: " + std::to_string(par->width) + "x" + std::to_string(par->height) +
                                " frames exceed the limit of " + std::to_string(limits.max_pixels_per_frame) +
                                " pixels");
    }
    return d;
  }

  AVFormatContext* fmt() const { return input_->fmt(); }
  AVStream* stream() const { return stream_; }

 private:
  Demuxer() = default;
  std::unique_ptr<av::MemoryInput> input_;
  AVStream* stream_ = nullptr;
};

double stream_fps(const AVStream* st) {
  if (st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0) return av_q2d(st->avg_frame_rate);
  if (st->r_frame_rate.num > 0 && st->r_frame_rate.den > 0) return av_q2d(st->r_frame_rate);
  return 0.0;
}

// Converts one decoded frame to RGB8 the way the ffmpeg CLI's scale filter does (see the file comment).
class RgbConverter {
 public:
  core::Expected<Image> convert(const AVFrame* f, const VideoLimits& limits) {
    if (f->width <= 0 || f->height <= 0) return core::corrupt_data("video: decoded frame has no size");
    if (static_cast<int64_t>(f->width) * f->height > limits.max_pixels_per_frame) {
      return core::out_of_range("video: a decoded frame of " + std::to_string(f->width) + "x" +
                                std::to_string(f->height) + " exceeds the pixel limit");
    }
    if (!sws_ || f->width != w_ || f->height != h_ || f->format != fmt_) {
      LOOM_RETURN_IF_ERROR(init(f->width, f->height, static_cast<AVPixelFormat>(f->format)));
    }
    // vf_scale (in_color_matrix=auto) resets the matrix and range from every frame.
    int* inv_table = nullptr;
    int* table = nullptr;
    int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
    sws_getColorspaceDetails(sws_.get(), &inv_table, &src_range, &table, &dst_range, &brightness, &contrast,
                             &saturation);
    const int* in_table = sws_getCoefficients(f->colorspace);
    if (f->color_range != AVCOL_RANGE_UNSPECIFIED) src_range = f->color_range == AVCOL_RANGE_JPEG;
    sws_setColorspaceDetails(sws_.get(), in_table, src_range, table, dst_range, brightness, contrast,
                             saturation);
    Image img;
    img.width = f->width;
    img.height = f->height;
    img.rgb.resize(static_cast<size_t>(f->width) * f->height * 3);
    uint8_t* dst[4] = {img.rgb.data(), nullptr, nullptr, nullptr};
    int dst_stride[4] = {f->width * 3, 0, 0, 0};
    const int rows = sws_scale(sws_.get(), f->data, f->linesize, 0, f->height, dst, dst_stride);
    if (rows != f->height) return core::internal_error("video: pixel conversion failed");
    return img;
  }

 private:
  core::Status init(int w, int h, AVPixelFormat fmt) {
    sws_.reset(sws_alloc_context());
    if (!sws_) return core::resource_exhausted("video: out of memory");
    SwsContext* s = sws_.get();
    av_opt_set_int(s, "srcw", w, 0);
    av_opt_set_int(s, "srch", h, 0);
    av_opt_set_int(s, "src_format", fmt, 0);
    av_opt_set_int(s, "dstw", w, 0);
    av_opt_set_int(s, "dsth", h, 0);
    av_opt_set_int(s, "dst_format", AV_PIX_FMT_RGB24, 0);
    av_opt_set_int(s, "sws_flags", SWS_BICUBIC, 0);
    // vf_scale's defaults: chroma position unset (-513) except MPEG-2 siting for yuv420p input.
    av_opt_set_int(s, "src_h_chr_pos", -513, 0);
    av_opt_set_int(s, "src_v_chr_pos", fmt == AV_PIX_FMT_YUV420P ? 128 : -513, 0);
    av_opt_set_int(s, "dst_h_chr_pos", -513, 0);
    av_opt_set_int(s, "dst_v_chr_pos", -513, 0);
    const int err = sws_init_context(s, nullptr, nullptr);
    if (err < 0) {
      sws_.reset();
      const char* name = av_get_pix_fmt_name(fmt);
      return core::unsupported(std::string("video: cannot convert pixel format ") +
                               (name ? name : "unknown") + " to RGB (" + av::error_text(err) + ")");
    }
    w_ = w;
    h_ = h;
    fmt_ = fmt;
    return core::Status::ok_status();
  }

  std::unique_ptr<SwsContext, SwsCloser> sws_;
  int w_ = 0, h_ = 0, fmt_ = AV_PIX_FMT_NONE;
};

}  // namespace

core::Expected<VideoInfo> probe_video(std::span<const uint8_t> bytes, const VideoLimits& limits) {
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Demuxer> d, Demuxer::open(bytes, limits));
  const AVStream* st = d->stream();
  VideoInfo info;
  info.width = st->codecpar->width;
  info.height = st->codecpar->height;
  info.fps = stream_fps(st);
  std::unique_ptr<AVPacket, av::PacketCloser> pkt(av_packet_alloc());
  if (!pkt) return core::resource_exhausted("video: out of memory");
  // Exact frame count: one packet per frame for every codec/container we accept (the tests check it
  // against ffprobe's decoded-frame count); header counts (nb_frames) are absent in webm/mkv.
  for (;;) {
    const int err = av_read_frame(d->fmt(), pkt.get());
    if (err == AVERROR_EOF) break;
    if (err < 0) return core::corrupt_data("video: cannot read packets (" + av::error_text(err) + ")");
    if (pkt->stream_index == st->index && pkt->size > 0) ++info.num_frames;
    av_packet_unref(pkt.get());
    if (info.num_frames > limits.max_frames_decoded) {
      return core::out_of_range("video: more than " + std::to_string(limits.max_frames_decoded) + " frames");
    }
  }
  if (info.num_frames == 0) return core::corrupt_data("video: the video stream has no frames");
  if (d->fmt()->duration != AV_NOPTS_VALUE && d->fmt()->duration > 0) {
    info.duration_s = static_cast<double>(d->fmt()->duration) / AV_TIME_BASE;
  } else if (info.fps > 0.0) {
    info.duration_s = static_cast<double>(info.num_frames) / info.fps;
  }
  return info;
}

core::Expected<std::vector<VideoFrame>> decode_video_frames(std::span<const uint8_t> bytes,
                                                            std::span<const int64_t> indices,
                                                            const VideoLimits& limits) {
  int64_t max_index = -1;
  for (int64_t i : indices) {
    if (i < 0) return core::invalid_argument("video: negative frame index " + std::to_string(i));
    max_index = std::max(max_index, i);
  }
  if (max_index >= limits.max_frames_decoded) {
    return core::out_of_range("video: frame index " + std::to_string(max_index) + " is past the limit of " +
                              std::to_string(limits.max_frames_decoded) + " decoded frames");
  }
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Demuxer> d, Demuxer::open(bytes, limits));
  std::vector<VideoFrame> out(indices.size());
  if (indices.empty()) return out;
  AVStream* st = d->stream();
  const AVCodec* codec = avcodec_find_decoder(st->codecpar->codec_id);
  if (codec == nullptr) {
    return core::unsupported(std::string("video: no decoder for codec ") +
                             avcodec_get_name(st->codecpar->codec_id));
  }
  std::unique_ptr<AVCodecContext, av::CodecCloser> ctx(avcodec_alloc_context3(codec));
  if (!ctx) return core::resource_exhausted("video: out of memory");
  if (avcodec_parameters_to_context(ctx.get(), st->codecpar) < 0) {
    return core::corrupt_data("video: invalid codec parameters");
  }
  ctx->thread_count = 1;
  // libavcodec's own guard against a size change mid-stream (a bomb hidden after a small first frame).
  // It checks the buffers it allocates, which are aligned up and carry edges (mpeg4: a 33x25 stream
  // fails under 2x + 64*64), so it gets 4x + 256*256 of headroom; the visible size of every converted
  // frame is checked exactly in RgbConverter, the header size in Demuxer::open.
  ctx->max_pixels = 4 * limits.max_pixels_per_frame + 256 * 256;
  ctx->pkt_timebase = st->time_base;
  // Report bitstream errors instead of concealing them: corrupt media must fail, not yield garbage.
  ctx->err_recognition |= AV_EF_EXPLODE;
  int err = avcodec_open2(ctx.get(), codec, nullptr);
  if (err < 0) return core::unsupported("video: cannot open the decoder (" + av::error_text(err) + ")");

  std::unique_ptr<AVPacket, av::PacketCloser> pkt(av_packet_alloc());
  std::unique_ptr<AVFrame, av::FrameCloser> frame(av_frame_alloc());
  if (!pkt || !frame) return core::resource_exhausted("video: out of memory");
  RgbConverter converter;
  const int64_t start_pts = st->start_time != AV_NOPTS_VALUE ? st->start_time : 0;
  int64_t n = 0;  // frames the decoder has output so far

  // Takes every frame the decoder has ready; returns false once past max_index.
  auto drain = [&]() -> core::Expected<bool> {
    for (;;) {
      const int r = avcodec_receive_frame(ctx.get(), frame.get());
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return true;
      if (r < 0) return core::corrupt_data("video: decoding failed (" + av::error_text(r) + ")");
      if ((frame->flags & AV_FRAME_FLAG_CORRUPT) != 0 || frame->decode_error_flags != 0) {
        return core::corrupt_data("video: frame " + std::to_string(n) + " is corrupt");
      }
      const int64_t idx = n++;
      for (size_t k = 0; k < indices.size(); ++k) {
        if (indices[k] != idx) continue;
        LOOM_ASSIGN_OR_RETURN(Image img, converter.convert(frame.get(), limits));
        const int64_t pts = frame->best_effort_timestamp;
        out[k].index = idx;
        out[k].timestamp_s =
            pts == AV_NOPTS_VALUE ? 0.0 : static_cast<double>(pts - start_pts) * av_q2d(st->time_base);
        out[k].image = std::move(img);
      }
      av_frame_unref(frame.get());
      if (n > max_index) return false;
    }
  };

  bool more = true;
  while (more) {
    err = av_read_frame(d->fmt(), pkt.get());
    if (err == AVERROR_EOF) break;
    if (err < 0) return core::corrupt_data("video: cannot read packets (" + av::error_text(err) + ")");
    if (pkt->stream_index != st->index) {
      av_packet_unref(pkt.get());
      continue;
    }
    err = avcodec_send_packet(ctx.get(), pkt.get());
    av_packet_unref(pkt.get());
    // drain() below always reads until EAGAIN, so the decoder never refuses input with EAGAIN here.
    if (err < 0) {
      return core::corrupt_data("video: decoding failed at frame " + std::to_string(n) + " (" +
                                av::error_text(err) + ")");
    }
    LOOM_ASSIGN_OR_RETURN(more, drain());
  }
  if (more) {
    err = avcodec_send_packet(ctx.get(), nullptr);  // flush the frames the decoder still holds
    if (err < 0 && err != AVERROR_EOF) {
      return core::corrupt_data("video: decoding failed (" + av::error_text(err) + ")");
    }
    LOOM_ASSIGN_OR_RETURN(more, drain());
  }
  if (n <= max_index) {
    return core::out_of_range("video: frame index " + std::to_string(max_index) +
                              " is out of range: the video has " + std::to_string(n) + " frames");
  }
  return out;
}

}  // namespace loom::media
#endif  // LOOM_HAVE_VIDEO
