// decode_image against Pillow: every fixture's pixels must equal what
// PIL.ImageOps.exif_transpose(Image.open(f)).convert("RGB") produced
// (tools/reference/make_media_fixtures.py). Tolerance: exact (0) for every format, JPEG included (same
// libjpeg-turbo islow IDCT + fancy upsampling).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "media/codecs.h"
#include "media/image.h"

namespace loom::media {
namespace {

std::vector<uint8_t> read_fixture(const std::string& name) {
  std::ifstream in(std::string(LOOM_FIXTURES_DIR) + "/media/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Binary PPM (P6, maxval 255) as written by the fixture script.
Image read_ppm(const std::string& name) {
  const std::vector<uint8_t> b = read_fixture(name);
  Image img;
  int maxval = 0, consumed = 0;
  const std::string head(b.begin(), b.begin() + std::min<size_t>(b.size(), 32));
  EXPECT_EQ(std::sscanf(head.c_str(), "P6 %d %d %d%n", &img.width, &img.height, &maxval, &consumed), 3)
      << name;
  EXPECT_EQ(maxval, 255);
  const size_t off = static_cast<size_t>(consumed) + 1;  // one whitespace byte after maxval
  img.rgb.assign(b.begin() + off, b.end());
  EXPECT_EQ(img.rgb.size(), static_cast<size_t>(img.width) * img.height * 3) << name;
  return img;
}

struct Case {
  const char* name;
  const char* ext;
};

class DecodeMatchesPillow : public ::testing::TestWithParam<Case> {};

TEST_P(DecodeMatchesPillow, ExactPixels) {
  const Case c = GetParam();
  const std::vector<uint8_t> bytes = read_fixture(std::string(c.name) + "." + c.ext);
  const Image want = read_ppm(std::string(c.name) + ".ppm");
  core::Expected<Image> got = decode_image(bytes);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->width, want.width);
  ASSERT_EQ(got->height, want.height);
  ASSERT_EQ(got->rgb.size(), want.rgb.size());
  int max_diff = 0;
  size_t first_bad = want.rgb.size();
  for (size_t i = 0; i < want.rgb.size(); ++i) {
    const int d = std::abs(int(got->rgb[i]) - int(want.rgb[i]));
    if (d > 0 && first_bad == want.rgb.size()) first_bad = i;
    max_diff = std::max(max_diff, d);
  }
  EXPECT_EQ(max_diff, 0) << c.name << ": first mismatch at byte " << first_bad << " (pixel " << first_bad / 3
                         << ")";
}

const Case kCases[] = {
    {"png_rgb", "png"},
    {"png_rgba", "png"},
    {"png_gray", "png"},
    {"png_gray_alpha", "png"},
    {"png_palette", "png"},
    {"png_palette_trns", "png"},
    {"png_gray1", "png"},
    {"png_gray16", "png"},
    {"png_rgb16", "png"},
    {"png_interlaced", "png"},
    {"png_rgba16", "png"},
    {"png_gray_alpha16", "png"},
    {"png_gray16_trns", "png"},
    {"png_palette4", "png"},
    {"jpeg_exif_be8", "jpg"},
    {"jpeg_xmp6", "jpg"},
    {"jpeg_exif1_xmp6", "jpg"},
    {"webp_xmp6", "webp"},
    {"png_xmp3", "png"},
    {"png_raw_profile8", "png"},

    {"png_exif6", "png"},
    {"jpeg_420", "jpg"},
    {"jpeg_444", "jpg"},
    {"jpeg_progressive", "jpg"},
    {"jpeg_gray", "jpg"},
    {"jpeg_cmyk", "jpg"},
    {"jpeg_exif1", "jpg"},
    {"jpeg_exif2", "jpg"},
    {"jpeg_exif3", "jpg"},
    {"jpeg_exif4", "jpg"},
    {"jpeg_exif5", "jpg"},
    {"jpeg_exif6", "jpg"},
    {"jpeg_exif7", "jpg"},
    {"jpeg_exif8", "jpg"},
    {"webp_lossless", "webp"},
    {"webp_lossy", "webp"},
    {"webp_lossy_alpha", "webp"},
    {"webp_exif3", "webp"},
    {"gif_static", "gif"},
    {"gif_animated", "gif"},
    {"gif_transparent", "gif"},
    {"gif_interlaced", "gif"},
    {"gif_offset", "gif"},
    {"gif_offset_trns", "gif"},
    {"bmp_24", "bmp"},
    {"bmp_8", "bmp"},
    {"bmp_gray", "bmp"},
    {"bmp_1", "bmp"},
    {"bmp_32", "bmp"},
    {"bmp_topdown", "bmp"},
    {"bmp_555", "bmp"},
    {"bmp_565", "bmp"},
    {"bmp_32_rgba_masks", "bmp"},
    {"bmp_rle8", "bmp"},
    {"bmp_rle4", "bmp"},
};

INSTANTIATE_TEST_SUITE_P(Fixtures, DecodeMatchesPillow, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.name);
                         });

TEST(DecodeImage, RotatedOrientationsSwapWidthAndHeight) {
  for (int o = 1; o <= 8; ++o) {
    core::Expected<Image> img = decode_image(read_fixture("jpeg_exif" + std::to_string(o) + ".jpg"));
    ASSERT_TRUE(img.ok()) << img.status().to_string();
    EXPECT_EQ(img->width, o >= 5 ? 7 : 13) << "orientation " << o;
    EXPECT_EQ(img->height, o >= 5 ? 13 : 7) << "orientation " << o;
  }
}

TEST(DecodeImage, AnimatedGifFirstFrameDiffersFromSecond) {
  // gif_animated's second frame is the inverse of the first; the first equals gif_static's pixels.
  core::Expected<Image> anim = decode_image(read_fixture("gif_animated.gif"));
  core::Expected<Image> still = decode_image(read_fixture("gif_static.gif"));
  ASSERT_TRUE(anim.ok() && still.ok());
  EXPECT_EQ(anim->rgb, still->rgb);
}

TEST(DecodeImage, XmpOrientationFollowsPillowsPattern) {
  auto o = [](std::string_view s) {
    return detail::xmp_orientation({reinterpret_cast<const uint8_t*>(s.data()), s.size()});
  };
  EXPECT_EQ(o("<a tiff:Orientation=\"6\"/>"), 6);
  EXPECT_EQ(o("<tiff:Orientation>8</tiff:Orientation>"), 8);
  EXPECT_EQ(o("tiff:Orientation='6' tiff:Orientation=\"3\""), 3);  // first match of the pattern
  EXPECT_EQ(o("tiff:Orientation=6"), std::nullopt);
  EXPECT_EQ(o(""), std::nullopt);
}

TEST(DecodeImage, ApplyOrientationIsPillowTranspose) {
  // 3x2 image with pixel value = 10 * y + x in every channel.
  Image img{3, 2, {}};
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int c = 0; c < 3; ++c) img.rgb.push_back(static_cast<uint8_t>(10 * y + x));
  auto flat = [](const Image& im) {
    std::vector<int> v;
    for (size_t i = 0; i < im.rgb.size(); i += 3) v.push_back(im.rgb[i]);
    return v;
  };
  // Expected values worked out from PIL.Image.Transpose semantics on [[0,1,2],[10,11,12]].
  EXPECT_EQ(flat(detail::apply_orientation(img, 2)), (std::vector<int>{2, 1, 0, 12, 11, 10}));
  EXPECT_EQ(flat(detail::apply_orientation(img, 3)), (std::vector<int>{12, 11, 10, 2, 1, 0}));
  EXPECT_EQ(flat(detail::apply_orientation(img, 4)), (std::vector<int>{10, 11, 12, 0, 1, 2}));
  EXPECT_EQ(flat(detail::apply_orientation(img, 5)), (std::vector<int>{0, 10, 1, 11, 2, 12}));
  EXPECT_EQ(flat(detail::apply_orientation(img, 6)), (std::vector<int>{10, 0, 11, 1, 12, 2}));
  EXPECT_EQ(flat(detail::apply_orientation(img, 7)), (std::vector<int>{12, 2, 11, 1, 10, 0}));
  EXPECT_EQ(flat(detail::apply_orientation(img, 8)), (std::vector<int>{2, 12, 1, 11, 0, 10}));
  EXPECT_EQ(detail::apply_orientation(img, 6).width, 2);
}

// --- errors: every one a Status, never a crash ---

TEST(DecodeImageErrors, EmptyInput) {
  core::Expected<Image> r = decode_image({});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument);
}

TEST(DecodeImageErrors, UnknownFormat) {
  const std::string text = "this is not an image at all";
  core::Expected<Image> r = decode_image({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("unrecognised format"), std::string::npos);
}

TEST(DecodeImageErrors, OversizedBytesAndPixels) {
  const std::vector<uint8_t> png = read_fixture("png_rgb.png");
  MediaLimits small_bytes;
  small_bytes.max_bytes = static_cast<int64_t>(png.size()) - 1;
  core::Expected<Image> r = decode_image(png, small_bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), core::StatusCode::kOutOfRange);

  MediaLimits few_pixels;
  few_pixels.max_pixels = 13 * 7 - 1;
  for (const char* f : {"png_rgb.png", "jpeg_420.jpg", "webp_lossy.webp", "gif_static.gif", "bmp_24.bmp"}) {
    core::Expected<Image> p = decode_image(read_fixture(f), few_pixels);
    ASSERT_FALSE(p.ok()) << f;
    EXPECT_EQ(p.status().code(), core::StatusCode::kOutOfRange) << f << ": " << p.status().to_string();
    few_pixels.max_pixels = 13 * 7;
    EXPECT_TRUE(decode_image(read_fixture(f), few_pixels).ok()) << f;
    few_pixels.max_pixels = 13 * 7 - 1;
  }
}

TEST(DecodeImageErrors, UnsupportedBmpVariantsAreRefusedClearly) {
  std::vector<uint8_t> bmp = read_fixture("bmp_8.bmp");
  bmp[30] = 4;  // compression = BI_JPEG
  core::Expected<Image> jpeg = decode_image(bmp);
  ASSERT_FALSE(jpeg.ok());
  EXPECT_EQ(jpeg.status().code(), core::StatusCode::kUnsupported);
  EXPECT_NE(jpeg.status().message().find("compression"), std::string::npos) << jpeg.status().to_string();
  bmp = read_fixture("bmp_24.bmp");
  bmp[28] = 2;  // 2 bits per pixel
  core::Expected<Image> b2 = decode_image(bmp);
  ASSERT_FALSE(b2.ok());
  EXPECT_EQ(b2.status().code(), core::StatusCode::kUnsupported);
  bmp = read_fixture("bmp_565.bmp");
  bmp[54] = 0x12;  // red mask no longer a layout Pillow reads
  core::Expected<Image> masks = decode_image(bmp);
  ASSERT_FALSE(masks.ok());
  EXPECT_EQ(masks.status().code(), core::StatusCode::kUnsupported);
}

TEST(DecodeImageErrors, HugeDeclaredSizeIsRefusedBeforeAllocating) {
  // A PNG header claiming 100000 x 100000 pixels (a decompression bomb) with no data behind it.
  std::vector<uint8_t> png = read_fixture("png_rgb.png");
  png.resize(33);  // signature + IHDR
  const uint8_t big[8] = {0, 1, 0x86, 0xa0, 0, 1, 0x86, 0xa0};
  std::copy(big, big + 8, png.begin() + 16);
  core::Expected<Image> r = decode_image(png);
  ASSERT_FALSE(r.ok());
  // libpng checks the IHDR CRC first (corrupt) — either way no allocation and a clear error.
  EXPECT_TRUE(r.status().code() == core::StatusCode::kOutOfRange ||
              r.status().code() == core::StatusCode::kCorruptData)
      << r.status().to_string();
}

// Every fixture cut at many lengths, and with bytes flipped, must give a Status (or, for flips that
// happen to stay valid, an image of the declared size) — never a crash or a hang.
TEST(DecodeImageErrors, TruncatedFilesAreCorrupt) {
  for (const Case& c : kCases) {
    const std::vector<uint8_t> full = read_fixture(std::string(c.name) + "." + c.ext);
    for (size_t len : {size_t{1}, size_t{4}, size_t{12}, size_t{30}, full.size() / 2, full.size() * 3 / 4}) {
      if (len >= full.size()) continue;
      std::vector<uint8_t> cut(full.begin(), full.begin() + len);
      core::Expected<Image> r = decode_image(cut);
      if (std::string(c.name) == "gif_animated" && len == full.size() * 3 / 4) {
        // Only the second frame is cut: the first is whole and decodes, as in Pillow.
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        continue;
      }
      EXPECT_FALSE(r.ok()) << c.name << " cut to " << len << " bytes decoded anyway";
      if (!r.ok()) {
        EXPECT_NE(r.status().code(), core::StatusCode::kInternal) << r.status().to_string();
        EXPECT_FALSE(r.status().message().empty());
      }
    }
  }
}

// Every prefix of every fixture: a Status or a well-formed image (a cut after the pixel data, e.g. a
// PNG missing only IEND, may decode, as in Pillow). Run under ASan/UBSan to catch overreads.
TEST(DecodeImageErrors, EveryTruncationIsHandled) {
  size_t ok = 0, total = 0;
  for (const Case& c : kCases) {
    const std::vector<uint8_t> full = read_fixture(std::string(c.name) + "." + c.ext);
    for (size_t len = 1; len < full.size(); ++len) {
      core::Expected<Image> r = decode_image(std::span<const uint8_t>(full.data(), len));
      ++total;
      if (r.ok()) {
        ++ok;
        EXPECT_EQ(r->rgb.size(), static_cast<size_t>(r->width) * r->height * 3);
      } else {
        EXPECT_FALSE(r.status().message().empty());
      }
    }
  }
  EXPECT_LT(ok, total / 10) << ok << " of " << total << " truncated files decoded";
}

TEST(DecodeImageErrors, FlippedBytesNeverCrash) {
  int failures = 0, total = 0;
  for (const Case& c : kCases) {
    const std::vector<uint8_t> full = read_fixture(std::string(c.name) + "." + c.ext);
    for (size_t pos = 8; pos < full.size(); pos += 7) {
      std::vector<uint8_t> bad = full;
      bad[pos] ^= 0x5a;
      core::Expected<Image> r = decode_image(bad);
      ++total;
      if (!r.ok()) {
        ++failures;
        EXPECT_FALSE(r.status().message().empty());
      } else {
        EXPECT_EQ(r->rgb.size(), static_cast<size_t>(r->width) * r->height * 3);
      }
    }
  }
  EXPECT_GT(failures, 0) << "no corruption detected in " << total << " damaged files";
}

}  // namespace
}  // namespace loom::media
