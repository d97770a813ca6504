// BMP, parsed here: Debian ships no BMP decoding library. Follows Pillow's BmpImagePlugin:
// BITMAPCOREHEADER and BITMAPINFOHEADER..V5; 1/4/8-bit palette (uncompressed, RLE8, RLE4), 16-bit
// (BI_RGB = 5-5-5, BI_BITFIELDS 5-6-5 or 5-5-5), 24-bit, 32-bit (BI_RGB = BGRX, BI_BITFIELDS with the
// byte-aligned layouts Pillow lists); bottom-up and top-down rows. Embedded JPEG/PNG, other bitfield
// layouts and other depths are refused with kUnsupported.
#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "media/codecs.h"

namespace loom::media::detail {
namespace {

constexpr uint32_t kRgb = 0, kRle8 = 1, kRle4 = 2, kBitfields = 3;

uint32_t u32(const uint8_t* p) {
  return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint16_t u16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

// Pillow's 32-bit bitfield layouts (r, g, b, a masks); all byte-aligned.
constexpr std::array<std::array<uint32_t, 4>, 8> kMasks32 = {{
    {0xFF0000, 0xFF00, 0xFF, 0x0},
    {0xFF000000, 0xFF0000, 0xFF00, 0x0},
    {0xFF000000, 0xFF00, 0xFF, 0x0},
    {0xFF000000, 0xFF0000, 0xFF00, 0xFF},
    {0xFF, 0xFF00, 0xFF0000, 0xFF000000},
    {0xFF0000, 0xFF00, 0xFF, 0xFF000000},
    {0xFF000000, 0xFF00, 0xFF, 0xFF0000},
    {0x0, 0x0, 0x0, 0x0},  // Pillow reads this as BGRA
}};

// Pillow's RLE decoder: indices in file order (bottom-up rows), exactly width * height of them, or an
// error (Pillow raises "not enough image data" when the stream ends early).
core::Expected<std::vector<uint8_t>> decode_rle(std::span<const uint8_t> file, size_t pos, int64_t width,
                                                int64_t height, bool rle4) {
  const size_t dest = static_cast<size_t>(width * height);
  std::vector<uint8_t> data;
  data.reserve(dest);
  auto pad_to = [&](size_t n) { data.resize(std::min(dest, n), 0); };
  int64_t x = 0;  // Pillow's column estimate; it only limits encoded runs
  while (data.size() < dest) {
    if (pos + 2 > file.size()) break;
    const int count = file[pos], byte = file[pos + 1];
    pos += 2;
    if (count != 0) {  // encoded run, clipped to the row
      const int64_t n = std::min<int64_t>(count, std::max<int64_t>(0, width - x));
      for (int64_t i = 0; i < n && data.size() < dest; ++i) {
        data.push_back(static_cast<uint8_t>(rle4 ? (i % 2 == 0 ? byte >> 4 : byte & 15) : byte));
      }
      x += n;
    } else if (byte == 0) {  // end of line
      pad_to((data.size() + width - 1) / width * width);
      x = 0;
    } else if (byte == 1) {  // end of bitmap
      break;
    } else if (byte == 2) {  // delta: right, up
      if (pos + 2 > file.size()) break;
      pad_to(data.size() + file[pos] + static_cast<size_t>(file[pos + 1]) * width);
      pos += 2;
      x = static_cast<int64_t>(data.size() % width);
    } else {  // absolute run of `byte` literal pixels, padded to a 16-bit boundary of the file
      const size_t n = std::min(dest - data.size(), static_cast<size_t>(byte));
      const size_t want = rle4 ? (n + 1) / 2 : n;
      const size_t got = std::min(want, file.size() - pos);
      for (size_t i = 0; i < got; ++i) {
        if (rle4) {
          data.push_back(file[pos + i] >> 4);
          if (i * 2 + 1 < n) data.push_back(file[pos + i] & 15);
        } else {
          data.push_back(file[pos + i]);
        }
      }
      pos += got;
      if (got < want || data.size() == dest) break;
      x += byte;
      if (pos % 2 != 0) ++pos;
    }
  }
  if (data.size() < dest) return core::corrupt_data("bmp: RLE data ends before the image does");
  return data;
}

}  // namespace

core::Expected<Decoded> decode_bmp(std::span<const uint8_t> bytes, const MediaLimits& limits) {
  const uint8_t* b = bytes.data();
  const size_t size = bytes.size();
  if (size < 14 + 12) return core::corrupt_data("bmp: truncated header");
  const uint32_t pixel_offset = u32(b + 10);
  const uint32_t header_size = u32(b + 14);
  int64_t width = 0, height = 0;
  int bpp = 0;
  uint32_t compression = kRgb, colors_used = 0;
  int palette_entry = 4;  // BGRX entries; BITMAPCOREHEADER uses BGR
  size_t palette_offset = 14 + static_cast<size_t>(header_size);
  std::array<uint32_t, 4> masks{};  // r, g, b, a
  if (header_size == 12) {
    width = u16(b + 18), height = static_cast<int16_t>(u16(b + 20)), bpp = u16(b + 24);
    palette_entry = 3;
  } else if (header_size >= 40 && header_size <= 124) {
    if (size < palette_offset) return core::corrupt_data("bmp: truncated header");
    width = static_cast<int32_t>(u32(b + 18)), height = static_cast<int32_t>(u32(b + 22));
    bpp = u16(b + 28), compression = u32(b + 30), colors_used = u32(b + 46);
    if (compression == kBitfields) {
      // Masks live inside V2+ headers, or follow a 40-byte header: at offset 54 either way.
      if (header_size == 40) palette_offset += 12;
      if (size < 14 + 40 + 12) return core::corrupt_data("bmp: truncated bitfield masks");
      masks = {u32(b + 54), u32(b + 58), u32(b + 62), header_size >= 56 ? u32(b + 66) : 0u};
    }
  } else {
    return core::unsupported("bmp: unknown header size " + std::to_string(header_size));
  }
  const bool top_down = height < 0;
  if (top_down) height = -height;
  LOOM_RETURN_IF_ERROR(check_dimensions(width, height, limits, "bmp"));

  // Pixel layout after this block: palette indices (bpp <= 8), or per-channel masks.
  bool rgb565 = false;
  if (compression == kRle8 || compression == kRle4) {
    if (bpp != (compression == kRle8 ? 8 : 4))
      return core::corrupt_data("bmp: RLE compression with wrong bit depth");
  } else if (compression == kBitfields) {
    bool known = false;
    if (bpp == 32) {
      for (const auto& m : kMasks32) known |= m == masks;
      if (masks == std::array<uint32_t, 4>{0, 0, 0, 0}) masks = {0xFF0000, 0xFF00, 0xFF, 0xFF000000};
    } else if (bpp == 24) {
      known = masks[0] == 0xFF0000 && masks[1] == 0xFF00 && masks[2] == 0xFF;
    } else if (bpp == 16) {
      rgb565 = masks[0] == 0xF800 && masks[1] == 0x7E0 && masks[2] == 0x1F;
      known = rgb565 || (masks[0] == 0x7C00 && masks[1] == 0x3E0 && masks[2] == 0x1F);
    }
    if (!known)
      return core::unsupported("bmp: unsupported bitfield layout for " + std::to_string(bpp) + "-bit");
  } else if (compression != kRgb) {
    return core::unsupported("bmp: unsupported compression " + std::to_string(compression) +
                             " (embedded JPEG/PNG BMPs are not supported)");
  } else if (bpp == 32) {
    masks = {0xFF0000, 0xFF00, 0xFF, 0};  // BGRX
  }
  if (bpp != 1 && bpp != 4 && bpp != 8 && bpp != 16 && bpp != 24 && bpp != 32) {
    return core::unsupported("bmp: unsupported bit depth " + std::to_string(bpp));
  }

  std::vector<uint8_t> palette;  // RGB triples; indices past the stored palette are black
  if (bpp <= 8) {
    const uint32_t max_colors = 1u << bpp;
    if (colors_used > max_colors)
      return core::corrupt_data("bmp: palette has more colours than the bit depth allows");
    const uint32_t n = colors_used == 0 ? max_colors : colors_used;
    if (palette_offset + static_cast<size_t>(n) * palette_entry > size) {
      return core::corrupt_data("bmp: truncated palette");
    }
    palette.assign(static_cast<size_t>(max_colors) * 3, 0);
    for (uint32_t i = 0; i < n; ++i) {
      const uint8_t* e = b + palette_offset + static_cast<size_t>(i) * palette_entry;
      palette[i * 3] = e[2], palette[i * 3 + 1] = e[1], palette[i * 3 + 2] = e[0];
    }
  }
  if (pixel_offset > size) return core::corrupt_data("bmp: pixel data offset past the end of the file");

  Decoded out;
  Image& img = out.image;
  img.width = static_cast<int32_t>(width);
  img.height = static_cast<int32_t>(height);
  img.rgb.resize(static_cast<size_t>(width * height) * 3);
  // Output row y comes from stored row (top_down ? y : height - 1 - y).
  if (compression == kRle8 || compression == kRle4) {
    LOOM_ASSIGN_OR_RETURN(std::vector<uint8_t> idx,
                          decode_rle(bytes, pixel_offset, width, height, compression == kRle4));
    for (int64_t y = 0; y < height; ++y) {
      const uint8_t* row = &idx[static_cast<size_t>((top_down ? y : height - 1 - y) * width)];
      for (int64_t x = 0; x < width; ++x) {
        std::memcpy(&img.rgb[static_cast<size_t>(y * width + x) * 3], &palette[row[x] * 3u], 3);
      }
    }
    return out;
  }

  const size_t stride = ((static_cast<size_t>(width) * bpp + 31) / 32) * 4;  // rows pad to 4 bytes
  if (stride * static_cast<size_t>(height) > size - pixel_offset)
    return core::corrupt_data("bmp: truncated pixel data");
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = b + pixel_offset + stride * static_cast<size_t>(top_down ? y : height - 1 - y);
    uint8_t* dst = &img.rgb[static_cast<size_t>(y * width) * 3];
    for (int64_t x = 0; x < width; ++x, dst += 3) {
      if (bpp == 32) {
        const uint32_t px = u32(row + x * 4);
        for (int c = 0; c < 3; ++c)
          dst[c] = static_cast<uint8_t>((px & masks[c]) >> std::countr_zero(masks[c]));
      } else if (bpp == 24) {
        const uint8_t* p = row + x * 3;  // B, G, R
        dst[0] = p[2], dst[1] = p[1], dst[2] = p[0];
      } else if (bpp == 16) {
        // Pillow's BGR;15 / BGR;16 unpackers: each field scaled as v * 255 / max.
        const uint32_t px = u16(row + x * 2);
        if (rgb565) {
          dst[0] = static_cast<uint8_t>(((px >> 11) & 31) * 255 / 31);
          dst[1] = static_cast<uint8_t>(((px >> 5) & 63) * 255 / 63);
        } else {
          dst[0] = static_cast<uint8_t>(((px >> 10) & 31) * 255 / 31);
          dst[1] = static_cast<uint8_t>(((px >> 5) & 31) * 255 / 31);
        }
        dst[2] = static_cast<uint8_t>((px & 31) * 255 / 31);
      } else {
        const int per_byte = 8 / bpp;
        const int shift = 8 - bpp * (1 + static_cast<int>(x % per_byte));  // MSB first
        const int k = (row[x / per_byte] >> shift) & ((1 << bpp) - 1);
        std::memcpy(dst, &palette[static_cast<size_t>(k) * 3], 3);
      }
    }
  }
  return out;
}

}  // namespace loom::media::detail
