// WebP through libwebp's animation decoder, as Pillow does for every WebP (still images are one-frame
// animations): the first frame is composited onto a transparent-black canvas, so fully transparent
// pixels come out (0, 0, 0) and alpha is then dropped, matching Pillow's convert("RGB").
#include <webp/decode.h>
#include <webp/demux.h>

#include <cstring>
#include <string>

#include "media/codecs.h"

namespace loom::media::detail {
namespace {

struct AnimDecoder {
  WebPAnimDecoder* dec = nullptr;
  ~AnimDecoder() { WebPAnimDecoderDelete(dec); }
};

struct Demuxer {
  WebPDemuxer* demux = nullptr;
  ~Demuxer() { WebPDemuxDelete(demux); }
};

}  // namespace

core::Expected<Decoded> decode_webp(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  WebPBitstreamFeatures features;
  const VP8StatusCode st = WebPGetFeatures(bytes.data(), bytes.size(), &features);
  if (st == VP8_STATUS_NOT_ENOUGH_DATA) return core::corrupt_data("webp: truncated file");
  if (st != VP8_STATUS_OK)
    return core::corrupt_data("webp: invalid header (status " + std::to_string(st) + ")");
  LOOM_RETURN_IF_ERROR(check_dimensions(features.width, features.height, limits, "webp"));

  const WebPData data{bytes.data(), bytes.size()};
  WebPAnimDecoderOptions opts;
  if (!WebPAnimDecoderOptionsInit(&opts)) return core::internal_error("webp: decoder ABI mismatch");
  opts.color_mode = MODE_RGBA;  // straight (not premultiplied) alpha, which is then dropped
  opts.use_threads = 0;
  AnimDecoder dec;
  dec.dec = WebPAnimDecoderNew(&data, &opts);
  if (dec.dec == nullptr) return core::corrupt_data("webp: cannot parse container (corrupt or truncated)");
  WebPAnimInfo info;
  if (!WebPAnimDecoderGetInfo(dec.dec, &info)) return core::corrupt_data("webp: cannot read image info");
  // The canvas can be larger than the first frame's bitstream features: check it too.
  LOOM_RETURN_IF_ERROR(check_dimensions(info.canvas_width, info.canvas_height, limits, "webp"));
  uint8_t* rgba = nullptr;
  int timestamp = 0;
  if (!WebPAnimDecoderGetNext(dec.dec, &rgba, &timestamp) || rgba == nullptr) {
    return core::corrupt_data("webp: cannot decode the first frame (corrupt or truncated)");
  }

  Decoded out;
  Image& img = out.image;
  img.width = static_cast<int32_t>(info.canvas_width);
  img.height = static_cast<int32_t>(info.canvas_height);
  const size_t n = static_cast<size_t>(img.width) * img.height;
  img.rgb.resize(n * 3);
  for (size_t i = 0; i < n; ++i) std::memcpy(&img.rgb[i * 3], &rgba[i * 4], 3);

  Demuxer demux;
  demux.demux = WebPDemux(&data);
  WebPChunkIterator chunk;
  if (demux.demux != nullptr && WebPDemuxGetChunk(demux.demux, "EXIF", 1, &chunk)) {
    out.exif.assign(chunk.chunk.bytes, chunk.chunk.bytes + chunk.chunk.size);
    WebPDemuxReleaseChunkIterator(&chunk);
  }
  if (demux.demux != nullptr && WebPDemuxGetChunk(demux.demux, "XMP ", 1, &chunk)) {
    out.xmp.assign(chunk.chunk.bytes, chunk.chunk.bytes + chunk.chunk.size);
    WebPDemuxReleaseChunkIterator(&chunk);
  }
  return out;
}

}  // namespace loom::media::detail
