// Where media bytes come from: OpenAI `image_url` values (data: URLs, local paths), with the
// server's policy enforced. No decoding here (see image.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "media/image.h"

namespace loom::media {

struct MediaPolicy {
  // Local files ("/abs/path", "file:///abs/path") are served only when their real path (after
  // resolving symlinks and "..") lies inside this directory's real path; empty refuses all local files
  // (vLLM's --allowed-local-media-path).
  std::string allowed_local_media_path;
  // http(s) URLs are refused unless allowed; even when allowed this build has no HTTP client and
  // answers kUnsupported.
  bool allow_http = false;
  MediaLimits limits;
};

// "data:<mime>;base64,<payload>", "file:///abs/path" or "/abs/path" -> the raw bytes, size-limited by
// policy.limits.max_bytes.
core::Expected<std::vector<uint8_t>> load_media_bytes(std::string_view url, const MediaPolicy& policy);

// Standard (+/) and URL-safe (-_) alphabets, padding optional, ASCII whitespace ignored.
core::Expected<std::vector<uint8_t>> decode_base64(std::string_view s);

}  // namespace loom::media
