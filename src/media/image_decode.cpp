// Format sniffing, limits and EXIF orientation; the per-format decoders live in *_codec.cpp.
#include <cstring>
#include <string>

#include "core/check.h"
#include "media/codecs.h"
#include "media/image.h"

namespace loom::media {
namespace detail {

core::Status check_dimensions(int64_t width, int64_t height, const MediaLimits& limits, const char* format) {
  if (width <= 0 || height <= 0) {
    return core::corrupt_data(std::string(format) + ": invalid image size " + std::to_string(width) + "x" +
                              std::to_string(height));
  }
  // Both factors are bounded by the formats (<= 2^31), so the product fits in int64.
  if (width * height > limits.max_pixels) {
    return core::out_of_range(std::string(format) + ": image is " + std::to_string(width) + "x" +
                              std::to_string(height) + " pixels, over the limit of " +
                              std::to_string(limits.max_pixels) + " pixels");
  }
  return {};
}

Image apply_orientation(const Image& img, int orientation) {
  if (orientation < 2 || orientation > 8) return img;
  const int64_t w = img.width, h = img.height;
  LOOM_CHECK(static_cast<int64_t>(img.rgb.size()) == w * h * 3)
      << "rgb buffer does not match " << w << "x" << h;
  const bool swap = orientation >= 5;  // 5..8 exchange width and height
  Image out;
  out.width = static_cast<int32_t>(swap ? h : w);
  out.height = static_cast<int32_t>(swap ? w : h);
  out.rgb.resize(img.rgb.size());
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      int64_t sy = 0, sx = 0;  // source pixel of out(y, x); names follow PIL.Image.Transpose
      switch (orientation) {
        case 2: sy = y, sx = w - 1 - x; break;          // FLIP_LEFT_RIGHT
        case 3: sy = h - 1 - y, sx = w - 1 - x; break;  // ROTATE_180
        case 4: sy = h - 1 - y, sx = x; break;          // FLIP_TOP_BOTTOM
        case 5: sy = x, sx = y; break;                  // TRANSPOSE
        case 6: sy = h - 1 - x, sx = y; break;          // ROTATE_270 (90 degrees clockwise)
        case 7: sy = h - 1 - x, sx = w - 1 - y; break;  // TRANSVERSE
        case 8: sy = x, sx = w - 1 - y; break;          // ROTATE_90 (90 degrees counter-clockwise)
      }
      std::memcpy(&out.rgb[(y * out.width + x) * 3], &img.rgb[(sy * w + sx) * 3], 3);
    }
  }
  return out;
}

}  // namespace detail

namespace {

bool starts_with(std::span<const uint8_t> b, const char* magic, size_t n, size_t offset = 0) {
  return b.size() >= offset + n && std::memcmp(b.data() + offset, magic, n) == 0;
}

}  // namespace

core::Expected<Image> decode_image(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  if (bytes.empty()) return core::invalid_argument("image: no bytes (empty input)");
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    return core::out_of_range("image: " + std::to_string(bytes.size()) + " bytes, over the limit of " +
                              std::to_string(limits.max_bytes) + " bytes");
  }
  core::Expected<detail::Decoded> decoded = core::unsupported("unreachable");
  if (starts_with(bytes, "\x89PNG\r\n\x1a\n", 8)) {
    decoded = detail::decode_png(bytes, limits);
  } else if (starts_with(bytes, "\xff\xd8\xff", 3)) {
    decoded = detail::decode_jpeg(bytes, limits);
  } else if (starts_with(bytes, "RIFF", 4) && starts_with(bytes, "WEBP", 4, 8)) {
    decoded = detail::decode_webp(bytes, limits);
  } else if (starts_with(bytes, "GIF87a", 6) || starts_with(bytes, "GIF89a", 6)) {
    decoded = detail::decode_gif(bytes, limits);
  } else if (starts_with(bytes, "BM", 2)) {
    decoded = detail::decode_bmp(bytes, limits);
  } else {
    return core::unsupported("image: unrecognised format (supported: PNG, JPEG, WebP, GIF, BMP)");
  }
  if (!decoded.ok()) return decoded.status();
  detail::Decoded& d = decoded.value();
  const int orientation = detail::image_orientation(d);
  if (orientation < 2 || orientation > 8) return std::move(d.image);  // exif_transpose ignores others
  return detail::apply_orientation(d.image, orientation);
}

}  // namespace loom::media
