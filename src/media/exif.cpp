// EXIF orientation through libexif.
#include <libexif/exif-data.h>

#include <cstring>
#include <string_view>
#include <vector>

#include "media/codecs.h"

namespace loom::media::detail {

std::optional<int> exif_orientation(std::span<const uint8_t> exif) {
  // libexif wants the APP1 form ("Exif\0\0" + TIFF); PNG eXIf and some WebP EXIF chunks omit the prefix.
  static constexpr uint8_t kHeader[6] = {'E', 'x', 'i', 'f', 0, 0};
  std::vector<uint8_t> buf;
  if (exif.size() < 6 || std::memcmp(exif.data(), kHeader, 6) != 0) {
    buf.assign(kHeader, kHeader + 6);
  }
  buf.insert(buf.end(), exif.begin(), exif.end());
  ExifData* data = exif_data_new();
  if (data == nullptr) return std::nullopt;
  // Orientation only: skip libexif's maker-note parsing and tag fix-ups.
  exif_data_unset_option(data, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_load_data(data, buf.data(), static_cast<unsigned int>(buf.size()));
  std::optional<int> orientation;
  ExifEntry* e = exif_content_get_entry(data->ifd[EXIF_IFD_0], EXIF_TAG_ORIENTATION);
  if (e != nullptr && e->components >= 1 && e->data != nullptr) {
    const ExifByteOrder order = exif_data_get_byte_order(data);
    if (e->format == EXIF_FORMAT_SHORT) orientation = exif_get_short(e->data, order);
    if (e->format == EXIF_FORMAT_LONG) orientation = static_cast<int>(exif_get_long(e->data, order));
  }
  exif_data_unref(data);
  return orientation;
}

std::optional<int> xmp_orientation(std::span<const uint8_t> xmp) {
  static constexpr std::string_view kKey = "tiff:Orientation";
  const std::string_view text(reinterpret_cast<const char*>(xmp.data()), xmp.size());
  for (size_t at = text.find(kKey); at != std::string_view::npos; at = text.find(kKey, at + 1)) {
    size_t p = at + kKey.size();
    if (text.substr(p, 2) == "=\"") {
      p += 2;
    } else if (text.substr(p, 1) == ">") {
      p += 1;
    } else {
      continue;
    }
    if (p < text.size() && text[p] >= '0' && text[p] <= '9') return text[p] - '0';
  }
  return std::nullopt;
}

int image_orientation(const Decoded& d) {
  std::optional<int> o;
  if (!d.exif.empty()) o = exif_orientation(d.exif);
  if (!o && !d.xmp.empty()) o = xmp_orientation(d.xmp);
  return o.value_or(1);
}

}  // namespace loom::media::detail
