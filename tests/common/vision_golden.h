// Vision tower goldens: tests/fixtures/<area>/{config.json, goldens.safetensors} as written by
// tools/reference/make_{vl,qwen3vl,cuda}_vision_goldens.py (tensors "<case>.<stage>", the case names
// in the safetensors metadata "cases"), and the whole-tensor comparison the vision tests report.
// Header-only; tests include it by path ("../common/vision_golden.h").
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "backends/cpu/cpu_ops.h"
#include "core/check.h"
#include "core/tensor.h"
#include "models/checkpoint/checkpoint.h"
#include "models/checkpoint/safetensors.h"
#include "models/model.h"
#include "ops/reference_ops.h"

namespace loom::testing {

using VisionGrids = std::vector<std::array<int64_t, 3>>;

class VisionGoldens {
 public:
  // dir: the fixture folder (the tiny checkpoint, config.json and goldens.safetensors).
  explicit VisionGoldens(std::string dir)
      : dir_(std::move(dir)), goldens_(open(dir_ + "/goldens.safetensors")) {}

  const std::string& dir() const { return dir_; }
  core::Tensor get(const std::string& name) const {
    auto t = goldens_.get(name);
    LOOM_CHECK(t.ok()) << t.status().to_string();
    return *t;
  }
  // A JSON value of the goldens file's metadata ("cases", ...).
  nlohmann::json metadata(const std::string& key) const {
    auto f = models::SafetensorsFile::open(dir_ + "/goldens.safetensors");
    LOOM_CHECK(f.ok()) << f.status().to_string();
    return nlohmann::json::parse((*f)->metadata().at(key));
  }
  std::vector<std::string> case_names() const { return metadata("cases").get<std::vector<std::string>>(); }
  // "<case>.grid_thw" [images, 3] i64.
  VisionGrids grids(const std::string& case_name) const {
    const core::Tensor g = get(case_name + ".grid_thw");
    LOOM_CHECK(g.dtype() == core::DType::kI64 && g.rank() == 2 && g.dim(1) == 3);
    VisionGrids out(g.dim(0));
    for (int64_t i = 0; i < g.dim(0); ++i)
      for (int j = 0; j < 3; ++j) out[i][j] = g.data_as<int64_t>()[i * 3 + j];
    return out;
  }
  // The fixture's config.json.
  nlohmann::json config() const {
    std::ifstream in(dir_ + "/config.json");
    LOOM_CHECK(in.good()) << "cannot read " << dir_ << "/config.json";
    return nlohmann::json::parse(in);
  }
  // Its "vision_config" through `parse` (a parse_vision_config); aborts when that fails.
  template <typename Parse>
  auto vision_config(Parse parse) const {
    auto c = parse(config().at("vision_config"));
    LOOM_CHECK(c.ok()) << c.status().to_string();
    return *c;
  }

 private:
  static models::Checkpoint open(const std::string& path) {
    auto c = models::Checkpoint::open(path);
    LOOM_CHECK(c.ok()) << c.status().to_string();
    return std::move(*c);
  }
  std::string dir_;
  models::Checkpoint goldens_;
};

// The goldens of tests/fixtures/<area>/, opened on first use (once per area).
inline const VisionGoldens& vision_goldens(const std::string& area) {
  static std::map<std::string, std::unique_ptr<VisionGoldens>> opened;
  std::unique_ptr<VisionGoldens>& g = opened[area];
  if (!g) g = std::make_unique<VisionGoldens>(std::string(LOOM_FIXTURES_DIR) + "/" + area);
  return *g;
}

// Whole-tensor comparison in f32 (both sides converted from f32/bf16/f16): max |got - want|,
// ||got - want|| / ||want|| and the RMS of want; nan when either side holds a NaN or an infinity.
struct TensorDiff {
  double max_abs = 0, rel_l2 = 0, ref_rms = 0;
  bool nan = false;
};

inline TensorDiff diff_tensors(const core::Tensor& got, const core::Tensor& want) {
  LOOM_CHECK(got.shape() == want.shape())
      << core::shape_to_string(got.shape()) << " vs " << core::shape_to_string(want.shape());
  const core::Tensor ga = got.to_f32(), wa = want.to_f32();
  const float* a = ga.data_as<float>();
  const float* b = wa.data_as<float>();
  TensorDiff d;
  double num = 0, den = 0;
  for (int64_t i = 0; i < ga.numel(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) d.nan = true;
    const double e = static_cast<double>(a[i]) - b[i];
    d.max_abs = std::max(d.max_abs, std::abs(e));
    num += e * e;
    den += static_cast<double>(b[i]) * b[i];
  }
  d.rel_l2 = std::sqrt(num / std::max(den, 1e-30));
  d.ref_rms = std::sqrt(den / std::max<int64_t>(ga.numel(), 1));
  return d;
}

// Dump name -> golden suffix for each stage of a tower forward: "vision.patch_embed", with `embed`
// "vision.embed" (Qwen3-VL), "vision.blk.<i>.out" for i < depth, "vision.deepstack.<k>" for
// k < deepstack, "vision.merger"; the golden of a stage is "<case>" + suffix.
using VisionStages = std::vector<std::pair<std::string, std::string>>;
inline VisionStages vision_stages(int64_t depth, bool embed = false, size_t deepstack = 0) {
  VisionStages s = {{"vision.patch_embed", ".patch_embed"}};
  if (embed) s.push_back({"vision.embed", ".embed"});
  for (int64_t b = 0; b < depth; ++b)
    s.push_back({"vision.blk." + std::to_string(b) + ".out", ".blk." + std::to_string(b) + ".out"});
  for (size_t k = 0; k < deepstack; ++k)
    s.push_back({"vision.deepstack." + std::to_string(k), ".deepstack." + std::to_string(k)});
  s.push_back({"vision.merger", ".merger"});
  return s;
}

// Keeps an f32 host copy of every dump of a forward: forward(..., recorder.hook()).
class DumpRecorder {
 public:
  DumpRecorder()
      : hook_([this](std::string_view n, const core::Tensor& t) { dumps_[std::string(n)] = t.to_f32(); }) {}
  DumpRecorder(const DumpRecorder&) = delete;
  DumpRecorder& operator=(const DumpRecorder&) = delete;
  const models::DumpHook* hook() const { return &hook_; }
  bool has(const std::string& name) const { return dumps_.count(name) != 0; }
  const core::Tensor& at(const std::string& name) const { return dumps_.at(name); }

 private:
  std::map<std::string, core::Tensor> dumps_;
  models::DumpHook hook_;
};

// The f32 host path against transformers f32 (tests/vl_vision, tests/q3vl_vision and the CPU run of
// tests/cuda_vision; why this bound, in those tests): rel L2 < 1e-5 and max abs < 1e-4 * max(1, RMS
// of the reference), no NaN or Inf. Prints the measured values under `label`.
inline void expect_f32_close(const core::Tensor& got, const core::Tensor& want, const std::string& label) {
  const TensorDiff d = diff_tensors(got, want);
  EXPECT_FALSE(d.nan) << label;
  EXPECT_LT(d.rel_l2, 1e-5) << label << " max_abs " << d.max_abs;
  EXPECT_LT(d.max_abs, 1e-4 * std::max(1.0, d.ref_rms)) << label << " rel_l2 " << d.rel_l2;
  std::printf("%-40s max_abs %.3g rel_l2 %.3g (ref rms %.3g)\n", label.c_str(), d.max_abs, d.rel_l2,
              d.ref_rms);
}

// The host backends the f32 golden tests run on (value-parameterised tests: ValuesIn(host_backends())).
struct HostBackend {
  const char* name;
  std::unique_ptr<ops::Ops> (*make)();
};
inline std::vector<HostBackend> host_backends() {
  return {{"reference", [] { return ops::make_reference_ops(); }},
          {"cpu", [] { return backends::cpu::make_cpu_ops(2); }}};
}
inline std::string host_backend_name(const ::testing::TestParamInfo<HostBackend>& info) {
  return info.param.name;
}

// ckpt's "model.visual.*" weights renamed "visual.*" (older checkpoints' names) written to
// dir/model.safetensors and opened.
inline models::Checkpoint legacy_prefix_copy(const models::Checkpoint& ckpt, const std::string& dir) {
  std::vector<std::pair<std::string, core::Tensor>> renamed;
  for (const std::string& n : ckpt.names()) {
    LOOM_CHECK(n.rfind("model.visual.", 0) == 0) << n;
    auto t = ckpt.get(n);
    LOOM_CHECK(t.ok()) << t.status().to_string();
    renamed.emplace_back(n.substr(6), *t);
  }
  std::filesystem::create_directories(dir);
  const core::Status st = models::write_safetensors(dir + "/model.safetensors", renamed);
  LOOM_CHECK(st.ok()) << st.to_string();
  auto legacy = models::Checkpoint::open(dir);
  LOOM_CHECK(legacy.ok()) << legacy.status().to_string();
  return std::move(*legacy);
}

}  // namespace loom::testing
