// Shared helpers for the multimodal request tests: fixtures, placeholder substitution, PPM/RGB goldens.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/sampling_params.h"
#include "server/openai_protocol.h"

namespace loom::server::testing {

inline std::string fixture_path(const std::string& rel) {
  return std::string(LOOM_FIXTURES_DIR) + "/" + rel;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline nlohmann::ordered_json load_json_fixture(const std::string& rel) {
  return nlohmann::ordered_json::parse(read_file(fixture_path(rel)));
}

// @MEDIA@ -> tests/fixtures/media, @VIDEO@ -> tests/fixtures/media_video (absolute), in every string.
inline nlohmann::ordered_json substitute_paths(nlohmann::ordered_json j) {
  if (j.is_string()) {
    std::string s = j.get<std::string>();
    for (auto [key, dir] : {std::pair<std::string, std::string>{"@MEDIA@", fixture_path("media")},
                            std::pair<std::string, std::string>{"@VIDEO@", fixture_path("media_video")}}) {
      for (size_t p = s.find(key); p != std::string::npos; p = s.find(key, p + dir.size()))
        s.replace(p, key.size(), dir);
    }
    return s;
  }
  if (j.is_array() || j.is_object())
    for (auto& v : j) v = substitute_paths(v);
  return j;
}

// The request body of conversation `id` in requests_mm/conversations.json.
inline nlohmann::ordered_json conversation(const std::string& id) {
  const auto all = load_json_fixture("requests_mm/conversations.json");
  for (const auto& c : all["conversations"])
    if (c["id"] == id) return c["request"];
  ADD_FAILURE() << "no conversation " << id;
  return {};
}

inline ChatRequest parse_ok(const nlohmann::ordered_json& body) {
  auto r = parse_chat_request(body, engine::SamplingDefaults{});
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : ChatRequest{};
}

struct Ppm {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};

// Binary P6 with maxval 255 (what make_media_fixtures.py writes).
inline Ppm read_ppm(const std::string& path) {
  const std::string data = read_file(path);
  std::istringstream in(data);
  std::string magic;
  int maxval = 0;
  Ppm p;
  in >> magic >> p.width >> p.height >> maxval;
  in.get();
  EXPECT_EQ(magic, "P6");
  EXPECT_EQ(maxval, 255);
  const auto offset = static_cast<size_t>(in.tellg());
  p.rgb.assign(data.begin() + static_cast<std::ptrdiff_t>(offset), data.end());
  return p;
}

}  // namespace loom::server::testing
