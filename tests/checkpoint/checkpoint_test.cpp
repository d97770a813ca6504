// Model folders: single file, sharded with an index, the *.safetensors fallback, and broken folders.
#include <gtest/gtest.h>

#include <random>

#include "core/dtype.h"
#include "models/checkpoint/checkpoint.h"
#include "test_util.h"

namespace loom::models {
namespace {

using core::DType;
using core::StatusCode;
using core::Tensor;
using testing::TempDir;
using testing::write_bytes;

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

void expect_error(const core::Status& st, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(st.ok()) << "expected " << core::status_code_name(code) << " containing '" << needle << "'";
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
}

// f32 values 0.5 * (i + offset), stored as `dtype` (exactly representable in bf16/f16 for small i).
Tensor ramp(core::Shape shape, DType dtype, float offset) {
  Tensor t = Tensor::empty(std::move(shape), dtype);
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = 0.5f * (static_cast<float>(i) + offset);
    if (dtype == DType::kF32) t.data_as<float>()[i] = v;
    if (dtype == DType::kBF16) t.data_as<uint16_t>()[i] = core::f32_to_bf16(v);
    if (dtype == DType::kF16) t.data_as<uint16_t>()[i] = core::f32_to_f16(v);
  }
  return t;
}

void write_index(const TempDir& dir, const nlohmann::json& weight_map) {
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
  write_bytes(dir.file("model.safetensors.index.json"), index.dump(2));
}

TEST(Checkpoint, ReadsTheTransformersShardedLayout) {
  // A tiny Qwen3 saved by transformers' save_pretrained(max_shard_size="4KB"): 4 shards + index.
  const std::string dir = std::string(LOOM_CHECKPOINT_REFERENCE_DIR) + "/sharded";
  auto ckpt = Checkpoint::open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  nlohmann::json expected = testing::read_json(dir + "/expected.json");
  std::vector<std::string> want_names;
  for (const auto& [name, _] : expected.items()) want_names.push_back(name);
  EXPECT_EQ(ckpt->names(), want_names);  // json objects iterate sorted, as names() is
  EXPECT_EQ(ckpt->files().size(), 4u);
  for (const auto& [name, want] : expected.items()) {
    SCOPED_TRACE(name);
    auto info = ckpt->info(name);
    ASSERT_TRUE(info.ok());
    EXPECT_EQ(info->dtype, DType::kBF16);
    EXPECT_EQ(info->shape, want["shape"].get<core::Shape>());
    auto t = ckpt->get(name, want["shape"].get<core::Shape>());
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(bytes_of(*t), testing::from_hex(want["hex"].get<std::string>()));
  }
  EXPECT_EQ(ckpt->names_with_prefix("model.layers.1.self_attn.").size(), 6u);
  EXPECT_EQ(ckpt->names_with_prefix("model.layers.1.self_attn.q_").size(), 2u);
  EXPECT_TRUE(ckpt->names_with_prefix("vision.").empty());
  EXPECT_EQ(ckpt->info("model.embed_tokens.weight")->shape, (core::Shape{64, 16}));
}

TEST(Checkpoint, SingleFileValuesShapesAndErrors) {
  TempDir dir;
  Tensor w = ramp({4, 3}, DType::kBF16, 1.0f);
  Tensor b = ramp({3}, DType::kF16, -2.0f);
  Tensor n = ramp({3}, DType::kF32, 7.0f);
  ASSERT_TRUE(write_safetensors(dir.file("model.safetensors"),
                                {{"model.layers.0.w", w}, {"model.layers.0.b", b}, {"model.norm", n}})
                  .ok());
  auto ckpt = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"model.layers.0.b", "model.layers.0.w", "model.norm"}));
  EXPECT_TRUE(ckpt->has("model.norm"));
  EXPECT_FALSE(ckpt->has("model.nor"));
  EXPECT_EQ(ckpt->names_with_prefix("model.layers.0."),
            (std::vector<std::string>{"model.layers.0.b", "model.layers.0.w"}));
  EXPECT_EQ(ckpt->names_with_prefix(""), ckpt->names());

  Tensor got = ckpt->get("model.layers.0.w").value().to_f32();
  Tensor want = w.to_f32();
  for (int64_t i = 0; i < want.numel(); ++i) EXPECT_EQ(got.data_as<float>()[i], want.data_as<float>()[i]);
  EXPECT_EQ(bytes_of(ckpt->get("model.layers.0.b").value()), bytes_of(b));
  EXPECT_EQ(bytes_of(ckpt->get("model.norm", {3}).value()), bytes_of(n));

  expect_error(ckpt->get("model.layers.0.w", {3, 4}).status(), StatusCode::kInvalidArgument, "[4, 3]");
  expect_error(ckpt->get("model.layers.0.w", {3, 4}).status(), StatusCode::kInvalidArgument,
               "expected [3, 4]");
  expect_error(ckpt->get("lm_head.weight").status(), StatusCode::kNotFound, "lm_head.weight");
  expect_error(ckpt->get("lm_head.weight", {1}).status(), StatusCode::kNotFound, "lm_head.weight");
  expect_error(ckpt->info("lm_head.weight").status(), StatusCode::kNotFound, "lm_head.weight");

  // A view outlives the Checkpoint that produced it.
  Tensor keep = ckpt->get("model.norm").value();
  ckpt = core::not_found("gone");
  EXPECT_EQ(bytes_of(keep), bytes_of(n));

  // A path to the file itself is accepted too.
  auto direct = Checkpoint::open(dir.file("model.safetensors"));
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ(direct->size(), 3u);
}

TEST(Checkpoint, ShardedWithIndex) {
  TempDir dir;
  ASSERT_TRUE(write_safetensors(dir.file("model-00001-of-00002.safetensors"),
                                {{"a", ramp({2, 2}, DType::kF32, 0)}, {"b", ramp({3}, DType::kBF16, 1)}})
                  .ok());
  ASSERT_TRUE(write_safetensors(dir.file("model-00002-of-00002.safetensors"),
                                {{"c", ramp({5}, DType::kF16, 2)}, {"extra", ramp({1}, DType::kF32, 3)}})
                  .ok());
  write_index(dir, {{"a", "model-00001-of-00002.safetensors"},
                    {"b", "model-00001-of-00002.safetensors"},
                    {"c", "model-00002-of-00002.safetensors"}});
  auto ckpt = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  // "extra" is in a shard but not in the weight_map: indexed as well.
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"a", "b", "c", "extra"}));
  EXPECT_EQ(ckpt->files().size(), 2u);
  EXPECT_EQ(ckpt->get("c").value().to_f32().data_as<float>()[4], 0.5f * (4 + 2));
  EXPECT_EQ(ckpt->get("b").value().dtype(), DType::kBF16);
}

TEST(Checkpoint, IndexErrors) {
  {
    TempDir dir;  // the index names a shard that is not there
    ASSERT_TRUE(write_safetensors(dir.file("s1.safetensors"), {{"a", ramp({1}, DType::kF32, 0)}}).ok());
    write_index(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kNotFound, "'s2.safetensors'");
  }
  {
    TempDir dir;  // the index maps a tensor to a shard that lacks it
    ASSERT_TRUE(write_safetensors(dir.file("s1.safetensors"), {{"a", ramp({1}, DType::kF32, 0)}}).ok());
    write_index(dir, {{"a", "s1.safetensors"}, {"ghost", "s1.safetensors"}});
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData, "'ghost'");
  }
  {
    TempDir dir;  // shard names must stay inside the folder
    write_index(dir, {{"a", "../outside.safetensors"}});
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData,
                 "leaves the model folder");
    write_index(dir, {{"a", "/etc/passwd"}});
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData,
                 "leaves the model folder");
  }
  {
    TempDir dir;  // not JSON, no weight_map, a non-string file name
    write_bytes(dir.file("model.safetensors.index.json"), "{\"weight_map\": ");
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData, "index.json");
    write_bytes(dir.file("model.safetensors.index.json"), R"({"metadata": {}})");
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData, "weight_map");
    write_bytes(dir.file("model.safetensors.index.json"), R"({"weight_map": {"a": 1}})");
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData, "weight_map['a']");
  }
  {
    TempDir dir;  // the same unlisted tensor in two shards: ambiguous
    ASSERT_TRUE(write_safetensors(dir.file("s1.safetensors"),
                                  {{"a", ramp({1}, DType::kF32, 0)}, {"dup", ramp({1}, DType::kF32, 0)}})
                    .ok());
    ASSERT_TRUE(write_safetensors(dir.file("s2.safetensors"),
                                  {{"b", ramp({1}, DType::kF32, 0)}, {"dup", ramp({1}, DType::kF32, 1)}})
                    .ok());
    write_index(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}});
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData, "'dup'");
    // ... unless the index says which copy is meant.
    write_index(dir, {{"a", "s1.safetensors"}, {"b", "s2.safetensors"}, {"dup", "s2.safetensors"}});
    auto ckpt = Checkpoint::open(dir.path().string());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
    EXPECT_EQ(ckpt->get("dup").value().data_as<float>()[0], 0.5f);
  }
  {
    TempDir dir;  // a corrupt shard: its error surfaces, naming the shard
    ASSERT_TRUE(write_safetensors(dir.file("s1.safetensors"), {{"a", ramp({8}, DType::kF32, 0)}}).ok());
    std::string bytes = testing::read_bytes(dir.file("s1.safetensors"));
    write_bytes(dir.file("s1.safetensors"), bytes.substr(0, bytes.size() - 3));
    write_index(dir, {{"a", "s1.safetensors"}});
    expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kCorruptData, "s1.safetensors");
  }
}

TEST(Checkpoint, FallbackToEverySafetensorsFile) {
  TempDir dir;
  ASSERT_TRUE(write_safetensors(dir.file("b.safetensors"), {{"y", ramp({2}, DType::kF32, 0)}}).ok());
  ASSERT_TRUE(write_safetensors(dir.file("a.safetensors"), {{"x", ramp({2}, DType::kF32, 0)}}).ok());
  write_bytes(dir.file("README.md"), "not weights");
  auto ckpt = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ(ckpt->names(), (std::vector<std::string>{"x", "y"}));
  ASSERT_EQ(ckpt->files().size(), 2u);
  EXPECT_NE(ckpt->files()[0].find("a.safetensors"), std::string::npos);  // sorted by file name

  ASSERT_TRUE(write_safetensors(dir.file("c.safetensors"), {{"x", ramp({2}, DType::kF32, 0)}}).ok());
  auto dup = Checkpoint::open(dir.path().string());
  expect_error(dup.status(), StatusCode::kCorruptData, "'x' appears in both");
}

TEST(Checkpoint, PrefersModelSafetensorsOverTheIndex) {
  TempDir dir;
  ASSERT_TRUE(write_safetensors(dir.file("model.safetensors"), {{"single", ramp({1}, DType::kF32, 0)}}).ok());
  write_index(dir, {{"sharded", "missing-shard.safetensors"}});
  auto ckpt = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_EQ(ckpt->names(), std::vector<std::string>{"single"});
}

TEST(Checkpoint, MissingOrEmptyFolders) {
  TempDir dir;
  expect_error(Checkpoint::open(dir.file("absent")).status(), StatusCode::kNotFound, "absent");
  expect_error(Checkpoint::open(dir.path().string()).status(), StatusCode::kNotFound, "safetensors");
  write_bytes(dir.file("weights.bin"), "x");
  expect_error(Checkpoint::open(dir.file("weights.bin")).status(), StatusCode::kInvalidArgument,
               "weights.bin");
}

TEST(Checkpoint, UnsupportedDtypeIsListedButNotReadable) {
  TempDir dir;
  write_bytes(dir.file("model.safetensors"),
              testing::raw_safetensors(R"({"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})",
                                       std::string(8, '\0')));
  auto ckpt = Checkpoint::open(dir.path().string());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().to_string();
  EXPECT_TRUE(ckpt->has("d"));
  expect_error(ckpt->info("d").status(), StatusCode::kUnsupported, "F64");
  expect_error(ckpt->get("d").status(), StatusCode::kUnsupported, "F64");
}

}  // namespace
}  // namespace loom::models
