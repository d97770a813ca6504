// GIF first frame through giflib, composed the way Pillow composes frame 0: the canvas is the logical
// screen (grown to contain the frame), filled with the frame's transparent index if its Graphics
// Control Extension sets one, else index 0; colours come from the local colour table, else the global
// one; indices past the table are black; without any table the index is a gray level (Pillow's "L").
// Later frames are never decoded.
#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "media/codecs.h"

namespace loom::media::detail {
namespace {

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t pos;
};

int read_fn(GifFileType* gif, GifByteType* out, int n) {
  auto* r = static_cast<Reader*>(gif->UserData);
  const size_t take = std::min(static_cast<size_t>(n), r->size - r->pos);
  std::memcpy(out, r->data + r->pos, take);
  r->pos += take;
  return static_cast<int>(take);
}

struct GifHandle {
  GifFileType* gif = nullptr;
  ~GifHandle() {
    int err = 0;
    if (gif != nullptr) DGifCloseFile(gif, &err);
  }
};

core::Status gif_error(const char* what, int code) {
  const char* msg = GifErrorString(code);
  return core::corrupt_data(std::string("gif: ") + what + ": " + (msg ? msg : "unknown error"));
}

}  // namespace

core::Expected<Decoded> decode_gif(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  Reader reader{bytes.data(), bytes.size(), 0};
  int err = 0;
  GifHandle h;
  h.gif = DGifOpen(&reader, read_fn, &err);
  if (h.gif == nullptr) return gif_error("cannot open", err);
  GifFileType* gif = h.gif;
  int transparent = -1;  // from the Graphics Control Extension preceding the first image
  for (;;) {
    GifRecordType type;
    if (DGifGetRecordType(gif, &type) == GIF_ERROR) return gif_error("reading record", gif->Error);
    if (type == TERMINATE_RECORD_TYPE) return core::corrupt_data("gif: file has no image");
    if (type == EXTENSION_RECORD_TYPE) {
      int code = 0;
      GifByteType* ext = nullptr;
      if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) return gif_error("reading extension", gif->Error);
      if (code == GRAPHICS_EXT_FUNC_CODE && ext != nullptr && ext[0] >= 4) {
        GraphicsControlBlock gcb;
        DGifExtensionToGCB(ext[0], ext + 1, &gcb);
        transparent = gcb.TransparentColor;  // NO_TRANSPARENT_COLOR (-1) when unset
      }
      while (ext != nullptr) {
        if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) return gif_error("reading extension", gif->Error);
      }
      continue;
    }
    if (type != IMAGE_DESC_RECORD_TYPE) continue;

    if (DGifGetImageDesc(gif) == GIF_ERROR) return gif_error("reading image descriptor", gif->Error);
    const GifImageDesc& d = gif->Image;
    const int64_t fx = d.Left, fy = d.Top, fw = d.Width, fh = d.Height;
    LOOM_RETURN_IF_ERROR(check_dimensions(fw, fh, limits, "gif"));
    const int64_t cw = std::max<int64_t>(gif->SWidth, fx + fw), ch = std::max<int64_t>(gif->SHeight, fy + fh);
    LOOM_RETURN_IF_ERROR(check_dimensions(cw, ch, limits, "gif"));

    std::vector<uint8_t> index(static_cast<size_t>(cw * ch),
                               static_cast<uint8_t>(transparent >= 0 ? transparent : 0));
    std::vector<GifPixelType> line(static_cast<size_t>(fw));
    // Interlaced frames store rows in four passes: every 8th from 0, every 8th from 4, every 4th from 2,
    // every 2nd from 1.
    static constexpr int kStart[4] = {0, 4, 2, 1}, kStep[4] = {8, 8, 4, 2};
    const int passes = d.Interlace ? 4 : 1;
    for (int p = 0; p < passes; ++p) {
      const int64_t start = d.Interlace ? kStart[p] : 0, step = d.Interlace ? kStep[p] : 1;
      for (int64_t y = start; y < fh; y += step) {
        if (DGifGetLine(gif, line.data(), static_cast<int>(fw)) == GIF_ERROR) {
          return gif_error("decoding pixels", gif->Error);
        }
        std::memcpy(&index[static_cast<size_t>((fy + y) * cw + fx)], line.data(), static_cast<size_t>(fw));
      }
    }

    const ColorMapObject* cmap = d.ColorMap != nullptr ? d.ColorMap : gif->SColorMap;
    Decoded out;
    Image& img = out.image;
    img.width = static_cast<int32_t>(cw);
    img.height = static_cast<int32_t>(ch);
    img.rgb.resize(index.size() * 3);
    for (size_t i = 0; i < index.size(); ++i) {
      uint8_t* dst = &img.rgb[i * 3];
      const int k = index[i];
      if (cmap == nullptr) {
        dst[0] = dst[1] = dst[2] = static_cast<uint8_t>(k);
      } else if (k < cmap->ColorCount) {
        dst[0] = cmap->Colors[k].Red, dst[1] = cmap->Colors[k].Green, dst[2] = cmap->Colors[k].Blue;
      } else {
        dst[0] = dst[1] = dst[2] = 0;
      }
    }
    return out;
  }
}

}  // namespace loom::media::detail
