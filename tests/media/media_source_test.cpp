// load_media_bytes / decode_base64: data URLs, base64 alphabets, and the local-path policy
// (inside, outside, symlink escape, "..", disabled) on a scratch directory under the build tree.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "media/image.h"
#include "media/media_source.h"

namespace loom::media {
namespace {

namespace fs = std::filesystem;

std::string str(const std::vector<uint8_t>& v) {
  return {v.begin(), v.end()};
}

TEST(Base64, StandardAndUrlSafeWithOptionalPaddingAndWhitespace) {
  EXPECT_EQ(str(*decode_base64("")), "");
  EXPECT_EQ(str(*decode_base64("Zg==")), "f");
  EXPECT_EQ(str(*decode_base64("Zg")), "f");
  EXPECT_EQ(str(*decode_base64("Zm8=")), "fo");
  EXPECT_EQ(str(*decode_base64("Zm9v")), "foo");
  EXPECT_EQ(str(*decode_base64("Zm9vYmFy")), "foobar");
  EXPECT_EQ(str(*decode_base64(" Zm9v\r\nYmE=\n")), "fooba");
  // 0xfb 0xff 0xbf: "+/+/" in the standard alphabet, "-_-_" in the URL-safe one.
  EXPECT_EQ(*decode_base64("+/+/"), (std::vector<uint8_t>{0xfb, 0xff, 0xbf}));
  EXPECT_EQ(*decode_base64("-_-_"), (std::vector<uint8_t>{0xfb, 0xff, 0xbf}));
}

TEST(Base64, RejectsInvalidInput) {
  for (const char* bad : {"Zm9v!", "Z", "Zm9vY", "Zg=A", "Zg===", "Z===", "Zm9=v"}) {
    core::Expected<std::vector<uint8_t>> r = decode_base64(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(DataUrl, Base64AndPercentEncoded) {
  const MediaPolicy policy;
  EXPECT_EQ(str(*load_media_bytes("data:image/png;base64,Zm9vYmFy", policy)), "foobar");
  EXPECT_EQ(str(*load_media_bytes("DATA:image/jpeg;BASE64,Zm9v", policy)), "foo");
  EXPECT_EQ(str(*load_media_bytes("data:;base64,Zm9v", policy)), "foo");
  EXPECT_EQ(str(*load_media_bytes("data:text/plain,a%20b", policy)), "a b");
  core::Expected<std::vector<uint8_t>> no_comma = load_media_bytes("data:image/png;base64", policy);
  ASSERT_FALSE(no_comma.ok());
  EXPECT_EQ(no_comma.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_FALSE(load_media_bytes("data:image/png;base64,Zm9v*", policy).ok());
}

TEST(DataUrl, DecodesARealImage) {
  // png_rgb.png through base64 and a data URL decodes to the same pixels as from its bytes.
  std::ifstream in(std::string(LOOM_FIXTURES_DIR) + "/media/png_rgb.png", std::ios::binary);
  const std::vector<uint8_t> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  static const char* kAlpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (bytes[i] << 16) | ((i + 1 < bytes.size() ? bytes[i + 1] : 0) << 8) |
                       (i + 2 < bytes.size() ? bytes[i + 2] : 0);
    b64 += kAlpha[n >> 18];
    b64 += kAlpha[(n >> 12) & 63];
    b64 += i + 1 < bytes.size() ? kAlpha[(n >> 6) & 63] : '=';
    b64 += i + 2 < bytes.size() ? kAlpha[n & 63] : '=';
  }
  core::Expected<std::vector<uint8_t>> got = load_media_bytes("data:image/png;base64," + b64, MediaPolicy{});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_EQ(*got, bytes);
  core::Expected<Image> a = decode_image(*got), b = decode_image(bytes);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->rgb, b->rgb);

  MediaPolicy tight;
  tight.limits.max_bytes = static_cast<int64_t>(bytes.size()) - 1;
  core::Expected<std::vector<uint8_t>> over = load_media_bytes("data:image/png;base64," + b64, tight);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), core::StatusCode::kOutOfRange);
}

TEST(RemoteUrl, HttpRefusedByDefaultAndUnsupportedWhenAllowed) {
  MediaPolicy policy;
  core::Expected<std::vector<uint8_t>> off = load_media_bytes("https://example.com/a.png", policy);
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(off.status().message().find("disabled"), std::string::npos);
  policy.allow_http = true;
  core::Expected<std::vector<uint8_t>> on = load_media_bytes("http://example.com/a.png", policy);
  ASSERT_FALSE(on.ok());
  EXPECT_EQ(on.status().code(), core::StatusCode::kUnsupported);
  EXPECT_FALSE(load_media_bytes("ftp://example.com/a.png", policy).ok());
  EXPECT_FALSE(load_media_bytes("relative/a.png", policy).ok());
  EXPECT_FALSE(load_media_bytes("", policy).ok());
}

// Layout: <tmp>/allowed/{img.bin, sub/nested.bin, escape -> ../secret.bin, inner -> img.bin},
// <tmp>/secret.bin
class LocalPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(LOOM_BINARY_DIR) / ("media_test_paths_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "allowed" / "sub");
    write(root_ / "allowed" / "img.bin", "inside");
    write(root_ / "allowed" / "sub" / "nested.bin", "nested");
    write(root_ / "secret.bin", "secret");
    fs::create_symlink(root_ / "secret.bin", root_ / "allowed" / "escape");
    fs::create_symlink(root_ / "allowed" / "img.bin", root_ / "allowed" / "inner");
    fs::create_directories(root_ / "allowed_sibling");
    write(root_ / "allowed_sibling" / "x.bin", "sibling");
    policy_.allowed_local_media_path = (root_ / "allowed").string();
  }
  void TearDown() override { fs::remove_all(root_); }
  static void write(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary) << s; }
  std::string path(const std::string& rel) const { return (root_ / rel).string(); }

  fs::path root_;
  MediaPolicy policy_;
};

TEST_F(LocalPaths, InsideIsRead) {
  EXPECT_EQ(str(*load_media_bytes(path("allowed/img.bin"), policy_)), "inside");
  EXPECT_EQ(str(*load_media_bytes("file://" + path("allowed/sub/nested.bin"), policy_)), "nested");
  EXPECT_EQ(str(*load_media_bytes("file://localhost" + path("allowed/img.bin"), policy_)), "inside");
  EXPECT_EQ(str(*load_media_bytes(path("allowed/sub/../img.bin"), policy_)), "inside");
  EXPECT_EQ(str(*load_media_bytes(path("allowed/inner"), policy_)), "inside");  // symlink staying inside
  std::string escaped = "file://" + path("allowed/img.bin");
  escaped.replace(escaped.rfind("img"), 3, "%69mg");  // percent-escaped 'i'
  EXPECT_EQ(str(*load_media_bytes(escaped, policy_)), "inside");
}

TEST_F(LocalPaths, AllowedDirectoryGivenThroughASymlink) {
  fs::create_directory_symlink(root_ / "allowed", root_ / "link_to_allowed");
  MediaPolicy via_link = policy_;
  via_link.allowed_local_media_path = path("link_to_allowed") + "/";
  EXPECT_EQ(str(*load_media_bytes(path("allowed/img.bin"), via_link)), "inside");
  EXPECT_EQ(str(*load_media_bytes(path("link_to_allowed/sub/nested.bin"), via_link)), "nested");
  EXPECT_FALSE(load_media_bytes(path("secret.bin"), via_link).ok());
}

TEST_F(LocalPaths, OutsideDotDotSymlinkAndSiblingAreRefused) {
  for (const std::string& url :
       {path("secret.bin"), path("allowed/../secret.bin"), path("allowed/escape"),
        "file://" + path("allowed/escape"), path("allowed_sibling/x.bin"), path("allowed")}) {
    core::Expected<std::vector<uint8_t>> r = load_media_bytes(url, policy_);
    ASSERT_FALSE(r.ok()) << url;
    EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument) << url << ": " << r.status().to_string();
  }
}

TEST_F(LocalPaths, MissingDisabledAndTooLarge) {
  core::Expected<std::vector<uint8_t>> missing = load_media_bytes(path("allowed/nope.bin"), policy_);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), core::StatusCode::kNotFound);

  MediaPolicy disabled;
  core::Expected<std::vector<uint8_t>> off = load_media_bytes(path("allowed/img.bin"), disabled);
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(off.status().message().find("disabled"), std::string::npos);

  MediaPolicy tight = policy_;
  tight.limits.max_bytes = 3;
  core::Expected<std::vector<uint8_t>> big = load_media_bytes(path("allowed/img.bin"), tight);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), core::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace loom::media
