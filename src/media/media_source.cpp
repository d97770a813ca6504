// data: URLs, base64 and local files under an allowed directory.
#include "media/media_source.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace loom::media {
namespace {

namespace fs = std::filesystem;

// -1: not in either alphabet. Both '+' '/' (standard) and '-' '_' (URL-safe) map to 62/63.
constexpr std::array<int8_t, 256> make_b64_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  for (int i = 0; i < 26; ++i) t['A' + i] = static_cast<int8_t>(i), t['a' + i] = static_cast<int8_t>(26 + i);
  for (int i = 0; i < 10; ++i) t['0' + i] = static_cast<int8_t>(52 + i);
  t['+'] = t['-'] = 62;
  t['/'] = t['_'] = 63;
  return t;
}
constexpr std::array<int8_t, 256> kB64 = make_b64_table();

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

bool starts_with_icase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

core::Expected<std::string> percent_decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    const int hi = i + 2 < s.size() ? hex_value(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_value(s[i + 2]) : -1;
    if (hi < 0 || lo < 0) return core::invalid_argument("bad percent-escape in URL");
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

core::Expected<std::vector<uint8_t>> load_data_url(std::string_view url, const MediaLimits& limits) {
  // data:[<mediatype>][;base64],<data>
  const size_t comma = url.find(',');
  if (comma == std::string_view::npos)
    return core::invalid_argument("data URL has no ',' before its payload");
  const std::string_view meta = url.substr(5, comma - 5);
  const std::string_view payload = url.substr(comma + 1);
  const bool base64 = meta.size() >= 7 && starts_with_icase(meta.substr(meta.size() - 7), ";base64");
  // Refuse a clearly oversized payload before decoding it: base64 is 4/3 of the bytes, so anything over
  // twice the limit (whitespace included) cannot fit. The exact check follows the decode.
  if (static_cast<int64_t>(payload.size()) > 2 * limits.max_bytes + 1024) {
    return core::out_of_range("data URL payload is over the limit of " + std::to_string(limits.max_bytes) +
                              " bytes");
  }
  std::vector<uint8_t> bytes;
  if (base64) {
    LOOM_ASSIGN_OR_RETURN(bytes, decode_base64(payload));
  } else {
    LOOM_ASSIGN_OR_RETURN(std::string s, percent_decode(payload));
    bytes.assign(s.begin(), s.end());
  }
  if (static_cast<int64_t>(bytes.size()) > limits.max_bytes) {
    return core::out_of_range("data URL payload is " + std::to_string(bytes.size()) +
                              " bytes, over the limit of " + std::to_string(limits.max_bytes) + " bytes");
  }
  return bytes;
}

core::Expected<std::vector<uint8_t>> load_local_file(const std::string& path, const MediaPolicy& policy) {
  if (policy.allowed_local_media_path.empty()) {
    return core::invalid_argument(
        "local media paths are disabled (no allowed local media directory is configured)");
  }
  if (path.empty() || path[0] != '/')
    return core::invalid_argument("local media path must be absolute: '" + path + "'");
  std::error_code ec;
  const fs::path root = fs::canonical(policy.allowed_local_media_path, ec);
  if (ec) {
    return core::invalid_argument("allowed local media directory '" + policy.allowed_local_media_path +
                                  "' cannot be resolved: " + ec.message());
  }
  // canonical() resolves every symlink and "..", so the containment test sees the real location.
  const fs::path real = fs::canonical(path, ec);
  if (ec) return core::not_found("local media file '" + path + "': " + ec.message());
  const std::string root_s = root.string(), real_s = real.string();
  const bool inside = real_s.size() > root_s.size() && real_s.compare(0, root_s.size(), root_s) == 0 &&
                      (root_s.back() == '/' || real_s[root_s.size()] == '/');
  if (!inside) {
    return core::invalid_argument("local media file '" + path + "' is outside the allowed directory '" +
                                  policy.allowed_local_media_path + "'");
  }
  if (!fs::is_regular_file(real, ec))
    return core::invalid_argument("local media path '" + path + "' is not a regular file");
  const auto size = fs::file_size(real, ec);
  if (ec) return core::io_error("local media file '" + path + "': " + ec.message());
  if (static_cast<int64_t>(size) > policy.limits.max_bytes) {
    return core::out_of_range("local media file '" + path + "' is " + std::to_string(size) +
                              " bytes, over the limit of " + std::to_string(policy.limits.max_bytes) +
                              " bytes");
  }
  std::ifstream in(real, std::ios::binary);
  if (!in) return core::io_error("cannot open local media file '" + path + "'");
  std::vector<uint8_t> bytes(size);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size));
  if (in.gcount() != static_cast<std::streamsize>(size))
    return core::io_error("cannot read local media file '" + path + "'");
  return bytes;
}

}  // namespace

core::Expected<std::vector<uint8_t>> decode_base64(std::string_view s) {
  std::vector<uint8_t> out;
  out.reserve(s.size() / 4 * 3 + 3);
  uint32_t acc = 0;
  int bits = 0, padding = 0;
  size_t symbols = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (is_space(c)) continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int v = kB64[static_cast<unsigned char>(c)];
    if (v < 0 || padding > 0) {
      return core::invalid_argument(padding > 0 ? "base64: data after '=' padding"
                                                : "base64: invalid character at offset " + std::to_string(i));
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    ++symbols;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<uint8_t>(acc >> bits));
    }
  }
  // A final group of 1 symbol cannot encode a byte; padding, if present, must complete the group.
  if (symbols % 4 == 1) return core::invalid_argument("base64: truncated input (dangling symbol)");
  if (padding > 0 && (symbols + padding) % 4 != 0)
    return core::invalid_argument("base64: wrong amount of '=' padding");
  return out;
}

core::Expected<std::vector<uint8_t>> load_media_bytes(std::string_view url, const MediaPolicy& policy) {
  if (url.empty()) return core::invalid_argument("empty media URL");
  if (starts_with_icase(url, "data:")) return load_data_url(url, policy.limits);
  if (starts_with_icase(url, "http://") || starts_with_icase(url, "https://")) {
    if (!policy.allow_http) return core::invalid_argument("http(s) media URLs are disabled on this server");
    return core::unsupported("http(s) media URLs are not supported in this build (no HTTP client)");
  }
  if (starts_with_icase(url, "file://")) {
    std::string_view rest = url.substr(7);
    if (starts_with_icase(rest, "localhost/")) rest.remove_prefix(9);
    if (rest.empty() || rest[0] != '/') {
      return core::invalid_argument("file URL must be file:///absolute/path (got '" + std::string(url) +
                                    "')");
    }
    LOOM_ASSIGN_OR_RETURN(std::string path, percent_decode(rest));
    return load_local_file(path, policy);
  }
  if (url[0] == '/') return load_local_file(std::string(url), policy);
  return core::invalid_argument("unsupported media URL (expected data:, file:// or an absolute path): '" +
                                std::string(url.substr(0, 64)) + "'");
}

}  // namespace loom::media
