// PNG through libpng's classic API. Pillow parity: 16-bit samples keep their high byte (Pillow's
// "RGB;16B" raw modes), except 16-bit grayscale, which Pillow opens as "I;16" and whose convert("RGB")
// clips values to 255; gAMA/iCCP are ignored (Pillow does not apply them either). EXIF comes from
// eXIf, else from a "Raw profile type exif" text chunk; XMP from the "XML:com.adobe.xmp" text chunk.
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <string>
#include <string_view>

#include "media/codecs.h"

namespace loom::media::detail {
namespace {

struct Reader {
  const uint8_t* data;
  size_t size;
  size_t pos;
  char error[160];
};

void read_fn(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<Reader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "truncated file");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

void error_fn(png_structp png, png_const_charp msg) {
  auto* r = static_cast<Reader*>(png_get_error_ptr(png));
  std::snprintf(r->error, sizeof(r->error), "%s", msg);
  png_longjmp(png, 1);
}

void warning_fn(png_structp, png_const_charp) {}

struct PngHandles {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~PngHandles() { png_destroy_read_struct(&png, info ? &info : nullptr, nullptr); }
};

// Phase 1 (under setjmp): header and transforms. Plain C data only crosses the longjmp.
bool read_header(PngHandles& h, png_uint_32* w, png_uint_32* ht, int* channels, int* depth, bool* gray16) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  png_read_info(h.png, h.info);
  int bit_depth = 0, color_type = 0;
  png_get_IHDR(h.png, h.info, w, ht, &bit_depth, &color_type, nullptr, nullptr, nullptr);
  *gray16 = bit_depth == 16 && color_type == PNG_COLOR_TYPE_GRAY;
  if (*gray16) {
    // Keep the 16-bit samples (tRNS is ignored, as Pillow's convert("RGB") drops it).
  } else {
    png_set_expand(h.png);  // palette -> RGB, gray 1/2/4 -> 8 (scaled), tRNS -> alpha
    png_set_strip_16(h.png);
  }
  png_set_interlace_handling(h.png);
  png_read_update_info(h.png, h.info);
  *channels = png_get_channels(h.png, h.info);
  *depth = png_get_bit_depth(h.png, h.info);
  return true;
}

bool read_rows(PngHandles& h, png_bytep* rows) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  png_read_image(h.png, rows);
  return true;
}

// eXIf may follow IDAT; an error after the pixels (missing IEND, bad CRC of a late chunk) only loses it.
bool read_end(PngHandles& h) {
  if (setjmp(png_jmpbuf(h.png))) return false;
  png_read_end(h.png, h.info);
  return true;
}

// ImageMagick's "Raw profile type exif" text: "\nexif\n<len>\n<hex lines>". Pillow hex-decodes
// everything after the third newline; undecodable text yields no EXIF here.
std::vector<uint8_t> parse_raw_profile(std::string_view v) {
  size_t pos = 0;
  for (int i = 0; i < 3; ++i) {
    pos = v.find('\n', pos);
    if (pos == std::string_view::npos) return {};
    ++pos;
  }
  std::vector<uint8_t> out;
  int hi = -1;
  for (const char c : v.substr(pos)) {
    if (c == '\n' || c == ' ' || c == '\t' || c == '\r') continue;
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    if (d < 0) return {};
    if (hi < 0) {
      hi = d;
    } else {
      out.push_back(static_cast<uint8_t>(hi * 16 + d));
      hi = -1;
    }
  }
  return hi < 0 ? out : std::vector<uint8_t>{};
}

}  // namespace

core::Expected<Decoded> decode_png(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  Reader reader{bytes.data(), bytes.size(), 0, {}};
  PngHandles h;
  h.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &reader, error_fn, warning_fn);
  if (h.png == nullptr) return core::resource_exhausted("png: cannot allocate decoder");
  h.info = png_create_info_struct(h.png);
  if (h.info == nullptr) return core::resource_exhausted("png: cannot allocate decoder");
  png_set_read_fn(h.png, &reader, read_fn);
  // Pixel limits are ours; lift libpng's own user limits (1M x 1M) so ours decide.
  png_set_user_limits(h.png, 0x7fffffff, 0x7fffffff);

  png_uint_32 w = 0, ht = 0;
  int channels = 0, depth = 0;
  bool gray16 = false;
  if (!read_header(h, &w, &ht, &channels, &depth, &gray16)) {
    return core::corrupt_data(std::string("png: ") + reader.error);
  }
  LOOM_RETURN_IF_ERROR(check_dimensions(w, ht, limits, "png"));
  const size_t row_bytes = png_get_rowbytes(h.png, h.info);
  if (row_bytes != static_cast<size_t>(w) * channels * (depth / 8)) {
    return core::unsupported("png: unexpected row layout after transforms");
  }
  std::vector<uint8_t> raw(row_bytes * ht);
  std::vector<png_bytep> rows(ht);
  for (png_uint_32 y = 0; y < ht; ++y) rows[y] = raw.data() + y * row_bytes;
  if (!read_rows(h, rows.data())) return core::corrupt_data(std::string("png: ") + reader.error);

  Decoded out;
  // Metadata after IDAT is lost if the tail is damaged; what was read before it stays in `info`.
  const bool tail_ok = read_end(h);
  png_uint_32 exif_len = 0;
  png_bytep exif = nullptr;
  if (tail_ok && png_get_eXIf_1(h.png, h.info, &exif_len, &exif) != 0 && exif != nullptr) {
    out.exif.assign(exif, exif + exif_len);
  }
  png_textp text = nullptr;
  int num_text = 0;
  png_get_text(h.png, h.info, &text, &num_text);
  for (int i = 0; i < num_text; ++i) {
    const std::string_view key = text[i].key;
    const size_t len =
        text[i].compression >= PNG_ITXT_COMPRESSION_NONE ? text[i].itxt_length : text[i].text_length;
    const std::string_view value(text[i].text != nullptr ? text[i].text : "",
                                 text[i].text != nullptr ? len : 0);
    if (key == "XML:com.adobe.xmp") out.xmp.assign(value.begin(), value.end());
    if (key == "Raw profile type exif" && out.exif.empty()) out.exif = parse_raw_profile(value);
  }
  Image& img = out.image;
  img.width = static_cast<int32_t>(w);
  img.height = static_cast<int32_t>(ht);
  const size_t n = static_cast<size_t>(w) * ht;
  img.rgb.resize(n * 3);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* dst = &img.rgb[i * 3];
    if (gray16) {
      const int v = (raw[i * 2] << 8) | raw[i * 2 + 1];  // big-endian sample
      dst[0] = dst[1] = dst[2] = static_cast<uint8_t>(v > 255 ? 255 : v);
    } else if (channels <= 2) {  // gray, gray + alpha (alpha dropped)
      dst[0] = dst[1] = dst[2] = raw[i * channels];
    } else {  // RGB, RGBA (alpha dropped)
      std::memcpy(dst, &raw[i * channels], 3);
    }
  }
  return out;
}

}  // namespace loom::media::detail
