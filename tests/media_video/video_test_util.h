// Fixture access for the video tests (tests/fixtures/media_video, made by
// tools/reference/make_video_fixtures.py).
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace loom::media::testing {

inline std::vector<uint8_t> read_video_fixture(const std::string& name) {
  std::ifstream in(std::string(LOOM_FIXTURES_DIR) + "/media_video/" + name, std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << name;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline const nlohmann::json& video_goldens() {
  static const nlohmann::json j = [] {
    const std::vector<uint8_t> b = read_video_fixture("goldens.json");
    return nlohmann::json::parse(b.begin(), b.end());
  }();
  return j;
}

}  // namespace loom::media::testing
