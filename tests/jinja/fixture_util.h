// Shared helpers for the jinja / chat template tests: fixture loading.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace loom::text::testing {

inline std::string fixture_path(const std::string& rel) {
  return std::string(LOOM_FIXTURES_DIR) + "/" + rel;
}

inline nlohmann::ordered_json load_json_fixture(const std::string& rel) {
  std::ifstream in(fixture_path(rel), std::ios::binary);
  EXPECT_TRUE(in.good()) << "missing fixture " << rel;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::ordered_json::parse(ss.str());
}

}  // namespace loom::text::testing
