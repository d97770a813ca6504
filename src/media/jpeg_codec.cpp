// JPEG through libjpeg(-turbo) with its default decoder settings (islow IDCT, fancy upsampling), which
// are what Pillow uses. CMYK/YCCK: Pillow assumes Adobe's inverted CMYK ("CMYK;I") and converts with
// its cmyk2rgb; both are reproduced here. A file that ends before the image does is an error, as in
// Pillow (libjpeg itself would only warn and pad with gray).
// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstddef>
#include <cstdio>

#include <jerror.h>
#include <jpeglib.h>

#include <cstring>
#include <string>
#include <string_view>

#include "media/codecs.h"

namespace loom::media::detail {
namespace {

struct ErrorMgr {
  jpeg_error_mgr pub;
  jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void error_exit(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorMgr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

void emit_message(j_common_ptr cinfo, int msg_level) {
  // Warnings (level -1) are ignored except premature end of data, which would silently pad.
  if (msg_level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) error_exit(cinfo);
}

struct Decompress {
  jpeg_decompress_struct cinfo{};
  ErrorMgr err{};
  bool created = false;
  ~Decompress() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
};

// Pillow's MULDIV255: a * b / 255 rounded, in integers.
inline int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

bool read_header(Decompress& d, std::span<const uint8_t> bytes) {
  if (setjmp(d.err.jump)) return false;
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  jpeg_mem_src(&d.cinfo, bytes.data(), static_cast<unsigned long>(bytes.size()));
  jpeg_save_markers(&d.cinfo, JPEG_APP0 + 1, 0xffff);
  jpeg_read_header(&d.cinfo, TRUE);
  switch (d.cinfo.jpeg_color_space) {
    case JCS_GRAYSCALE: d.cinfo.out_color_space = JCS_GRAYSCALE; break;
    case JCS_CMYK:
    case JCS_YCCK: d.cinfo.out_color_space = JCS_CMYK; break;
    default: d.cinfo.out_color_space = JCS_RGB; break;
  }
  return true;
}

bool read_pixels(Decompress& d, uint8_t* raw, size_t row_bytes) {
  if (setjmp(d.err.jump)) return false;
  jpeg_start_decompress(&d.cinfo);
  while (d.cinfo.output_scanline < d.cinfo.output_height) {
    JSAMPROW row = raw + static_cast<size_t>(d.cinfo.output_scanline) * row_bytes;
    jpeg_read_scanlines(&d.cinfo, &row, 1);
  }
  jpeg_finish_decompress(&d.cinfo);
  return true;
}

}  // namespace

core::Expected<Decoded> decode_jpeg(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  Decompress d;
  d.cinfo.err = jpeg_std_error(&d.err.pub);
  d.err.pub.error_exit = error_exit;
  d.err.pub.emit_message = emit_message;
  if (!read_header(d, bytes)) return core::corrupt_data(std::string("jpeg: ") + d.err.message);
  static constexpr std::string_view kXmpSig{"http://ns.adobe.com/xap/1.0/\0", 29};
  // Saved markers live in libjpeg's image pool, which jpeg_finish_decompress frees: copy EXIF now.
  Decoded out;
  for (jpeg_saved_marker_ptr m = d.cinfo.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1) continue;
    if (m->data_length >= 6 && std::memcmp(m->data, "Exif\0\0", 6) == 0 && out.exif.empty()) {
      out.exif.assign(m->data, m->data + m->data_length);  // Pillow keeps the first Exif APP1
    } else if (m->data_length >= kXmpSig.size() &&
               std::memcmp(m->data, kXmpSig.data(), kXmpSig.size()) == 0) {
      out.xmp.assign(m->data + kXmpSig.size(), m->data + m->data_length);  // and the last XMP one
    }
  }
  LOOM_RETURN_IF_ERROR(check_dimensions(d.cinfo.image_width, d.cinfo.image_height, limits, "jpeg"));
  const int comps = d.cinfo.out_color_space == JCS_GRAYSCALE ? 1
                    : d.cinfo.out_color_space == JCS_CMYK    ? 4
                                                             : 3;
  const size_t w = d.cinfo.image_width, h = d.cinfo.image_height;
  std::vector<uint8_t> raw(w * h * comps);
  if (!read_pixels(d, raw.data(), w * comps))
    return core::corrupt_data(std::string("jpeg: ") + d.err.message);

  Image& img = out.image;
  img.width = static_cast<int32_t>(w);
  img.height = static_cast<int32_t>(h);
  img.rgb.resize(w * h * 3);
  for (size_t i = 0; i < w * h; ++i) {
    uint8_t* dst = &img.rgb[i * 3];
    if (comps == 1) {
      dst[0] = dst[1] = dst[2] = raw[i];
    } else if (comps == 3) {
      std::memcpy(dst, &raw[i * 3], 3);
    } else {
      // Stored inverted (Adobe); Pillow's cmyk2rgb: channel = nk - c * nk / 255 with nk = 255 - k.
      const uint8_t* p = &raw[i * 4];
      const int nk = p[3];  // 255 - k, with k = 255 - p[3]
      for (int c = 0; c < 3; ++c) dst[c] = static_cast<uint8_t>(nk - muldiv255(255 - p[c], nk));
    }
  }
  return out;
}

}  // namespace loom::media::detail
