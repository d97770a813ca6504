#if LOOM_HAVE_VIDEO
#include "media/av_input.h"

#include <algorithm>
#include <cstring>
#include <mutex>

extern "C" {
#include <libavutil/error.h>
}

namespace loom::media::av {

void quiet_logs() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_level(AV_LOG_FATAL); });
}

std::string error_text(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  av_strerror(err, buf, sizeof(buf));
  return buf;
}

int MemoryInput::Reader::read(void* opaque, uint8_t* buf, int size) {
  auto* r = static_cast<Reader*>(opaque);
  const int64_t left = static_cast<int64_t>(r->bytes.size()) - r->pos;
  if (left <= 0) return AVERROR_EOF;
  const int n = static_cast<int>(std::min<int64_t>(left, size));
  std::memcpy(buf, r->bytes.data() + r->pos, static_cast<size_t>(n));
  r->pos += n;
  return n;
}

int64_t MemoryInput::Reader::seek(void* opaque, int64_t offset, int whence) {
  auto* r = static_cast<Reader*>(opaque);
  const auto size = static_cast<int64_t>(r->bytes.size());
  int64_t target = 0;
  switch (whence & ~AVSEEK_FORCE) {
    case AVSEEK_SIZE: return size;
    case SEEK_SET: target = offset; break;
    case SEEK_CUR: target = r->pos + offset; break;
    case SEEK_END: target = size + offset; break;
    default: return AVERROR(EINVAL);
  }
  if (target < 0 || target > size) return AVERROR(EINVAL);
  r->pos = target;
  return target;
}

core::Expected<std::unique_ptr<MemoryInput>> MemoryInput::open(std::span<const uint8_t> bytes,
                                                               int64_t max_bytes, const std::string& what,
                                                               const std::string& kind) {
  quiet_logs();
  if (bytes.empty()) return core::invalid_argument(what + ": empty input");
  if (static_cast<int64_t>(bytes.size()) > max_bytes)
    return core::out_of_range(what + ": " + std::to_string(bytes.size()) + " bytes exceeds the limit of " +
                              std::to_string(max_bytes));
  auto in = std::unique_ptr<MemoryInput>(new MemoryInput());
  in->reader_.bytes = bytes;
  constexpr int kIoBufferSize = 64 << 10;
  auto* buf = static_cast<uint8_t*>(av_malloc(kIoBufferSize));
  if (buf == nullptr) return core::resource_exhausted(what + ": out of memory");
  in->io_.reset(
      avio_alloc_context(buf, kIoBufferSize, 0, &in->reader_, &Reader::read, nullptr, &Reader::seek));
  if (!in->io_) {
    av_free(buf);
    return core::resource_exhausted(what + ": out of memory");
  }
  AVFormatContext* fmt = avformat_alloc_context();
  if (fmt == nullptr) return core::resource_exhausted(what + ": out of memory");
  fmt->pb = in->io_.get();
  fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
  int err = avformat_open_input(&fmt, nullptr, nullptr, nullptr);  // frees fmt on failure
  if (err < 0)
    return core::corrupt_data(what + ": not a recognised or readable " + kind + " (" + error_text(err) + ")");
  in->fmt_.reset(fmt);
  err = avformat_find_stream_info(fmt, nullptr);
  if (err < 0) return core::corrupt_data(what + ": cannot read stream info (" + error_text(err) + ")");
  return in;
}

}  // namespace loom::media::av
#endif  // LOOM_HAVE_VIDEO
