// Image decoding: encoded bytes -> RGB8 pixels, the way transformers sees them
// (PIL.Image.open -> ImageOps.exif_transpose -> .convert("RGB"); see README.md).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/status.h"

namespace loom::media {

// RGB8, row-major: rgb.size() == height * width * 3, pixel (y, x) at rgb[(y * width + x) * 3].
struct Image {
  int32_t width = 0;
  int32_t height = 0;
  std::vector<uint8_t> rgb;
};

// Per-request guards against oversized media and decompression bombs. Pixels are checked from the
// header, before any pixel buffer is allocated.
struct MediaLimits {
  int64_t max_bytes = 64 << 20;
  int64_t max_pixels = 8192LL * 8192;
};

// Sniffs the format from the bytes (never a file name): PNG, JPEG, WebP, GIF (first frame), BMP.
// Applies the EXIF orientation (JPEG APP1, WebP EXIF chunk, PNG eXIf chunk) and converts grayscale,
// palette and alpha images to RGB; alpha is dropped, not blended, as Pillow's convert("RGB") does.
// Errors: kInvalidArgument (empty), kUnsupported (unknown format / feature), kCorruptData (corrupt or
// truncated), kOutOfRange (over `limits`).
core::Expected<Image> decode_image(std::span<const uint8_t> bytes, const MediaLimits& limits = {});

}  // namespace loom::media
