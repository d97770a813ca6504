// Internal to loom_media: one decoder per container format. Each returns the image in its stored
// orientation plus the raw EXIF payload (TIFF header onwards, or with an "Exif\0\0" prefix) if any;
// decode_image() applies the orientation.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/status.h"
#include "media/image.h"

namespace loom::media::detail {

struct Decoded {
  Image image;
  std::vector<uint8_t> exif;  // EXIF payload, with or without the "Exif\0\0" prefix; empty if none
  std::vector<uint8_t> xmp;   // XMP packet (text); Pillow reads tiff:Orientation from it if EXIF has none
};

core::Expected<Decoded> decode_png(std::span<const uint8_t> bytes, const MediaLimits& limits);
core::Expected<Decoded> decode_jpeg(std::span<const uint8_t> bytes, const MediaLimits& limits);
core::Expected<Decoded> decode_webp(std::span<const uint8_t> bytes, const MediaLimits& limits);
core::Expected<Decoded> decode_gif(std::span<const uint8_t> bytes, const MediaLimits& limits);
core::Expected<Decoded> decode_bmp(std::span<const uint8_t> bytes, const MediaLimits& limits);

// kOutOfRange when width x height exceeds limits.max_pixels; kCorruptData for non-positive sizes.
core::Status check_dimensions(int64_t width, int64_t height, const MediaLimits& limits, const char* format);

// The Orientation tag of an EXIF payload as stored (any value), or nullopt when there is none or the
// payload cannot be parsed.
std::optional<int> exif_orientation(std::span<const uint8_t> exif);

// Pillow's XMP fallback: the digit in the first match of `tiff:Orientation(="|>)([0-9])`, or nullopt.
std::optional<int> xmp_orientation(std::span<const uint8_t> xmp);

// The orientation Pillow's exif_transpose acts on: EXIF's tag if present, else XMP's, else 1.
int image_orientation(const Decoded& d);

// Returns `img` transformed as PIL.ImageOps.exif_transpose does for `orientation`.
Image apply_orientation(const Image& img, int orientation);

}  // namespace loom::media::detail
