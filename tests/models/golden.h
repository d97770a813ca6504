// Loads the transformers goldens written by tools/reference/make_tiny_models.py.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tensor.h"

namespace loom::testing {

inline std::string fixtures_dir() {
  return LOOM_FIXTURES_DIR;
}
inline std::string model_dir(const std::string& name) {
  return fixtures_dir() + "/models/" + name;
}
inline std::string golden_dir(const std::string& name) {
  return fixtures_dir() + "/goldens/" + name;
}

inline nlohmann::json load_cases(const std::string& name) {
  std::ifstream in(golden_dir(name) + "/cases.json");
  EXPECT_TRUE(in.good()) << "missing goldens for " << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

struct Diff {
  double max_abs = 0;
  double rel_l2 = 0;
  bool has_nan = false;
};

// Whole-tensor comparison: max |a-b| and ||a-b|| / ||b||.
inline Diff compare(const float* a, const float* b, size_t n) {
  Diff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) d.has_nan = true;
    const double e = static_cast<double>(a[i]) - b[i];
    d.max_abs = std::max(d.max_abs, std::abs(e));
    num += e * e;
    den += static_cast<double>(b[i]) * b[i];
  }
  d.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  return d;
}

}  // namespace loom::testing
