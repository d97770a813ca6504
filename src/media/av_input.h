// Internal to the media layer (video_decode.cpp, audio_decode.cpp; built only with ffmpeg's libraries):
// a container opened from the caller's bytes through a custom AVIOContext, the RAII closers for ffmpeg
// objects, and error text. Not part of the layer's interface.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/status.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

namespace loom::media::av {

// ffmpeg logs every bitstream problem to stderr; for us a corrupt upload is a Status returned to the
// caller, so the (process-wide) log level is lowered to fatal once, on first use of a decoder.
void quiet_logs();
std::string error_text(int err);

struct FormatCloser {
  void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};
struct IoCloser {
  void operator()(AVIOContext* io) const {
    av_freep(&io->buffer);
    avio_context_free(&io);
  }
};
struct CodecCloser {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct PacketCloser {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct FrameCloser {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};

// Read/seek callbacks over the caller's bytes, and the contexts that read them. Members are declared so
// that the format context closes before the IO context it reads from. Not movable (ffmpeg keeps a
// pointer to `reader`).
class MemoryInput {
 public:
  // Opens `bytes` (which must outlive this) and reads the stream info. `what` prefixes errors ("video",
  // "audio"); `kind` names the content in the "not a recognised ..." message. Errors: InvalidArgument
  // (empty), OutOfRange (over max_bytes), CorruptData (not a readable container), ResourceExhausted.
  static core::Expected<std::unique_ptr<MemoryInput>> open(std::span<const uint8_t> bytes, int64_t max_bytes,
                                                           const std::string& what, const std::string& kind);
  MemoryInput(const MemoryInput&) = delete;
  MemoryInput& operator=(const MemoryInput&) = delete;

  AVFormatContext* fmt() const { return fmt_.get(); }

 private:
  MemoryInput() = default;
  struct Reader {
    std::span<const uint8_t> bytes;
    int64_t pos = 0;
    static int read(void* opaque, uint8_t* buf, int size);
    static int64_t seek(void* opaque, int64_t offset, int whence);
  };
  Reader reader_;
  std::unique_ptr<AVIOContext, IoCloser> io_;
  std::unique_ptr<AVFormatContext, FormatCloser> fmt_;
};

}  // namespace loom::media::av
