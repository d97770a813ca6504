// generation_config.json: defaults, eos merging with config.json, and malformed files.
#include <gtest/gtest.h>

#include "models/config/generation_config.h"
#include "test_util.h"

namespace loom::models {
namespace {

using core::StatusCode;
using nlohmann::json;

const std::string kConfigs = std::string(LOOM_FIXTURES_DIR) + "/configs";

struct Loaded {
  ModelConfig model;
  GenerationConfig gen;
};

Loaded load(const std::string& name) {
  const std::string dir = kConfigs + "/" + name;
  auto cfg = load_model_config(dir);
  EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
  auto gen = load_generation_config(dir, cfg.value());
  EXPECT_TRUE(gen.ok()) << gen.status().to_string();
  return {cfg.value(), gen.value()};
}

void expect_error(const core::Status& st, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(st.ok()) << "expected " << core::status_code_name(code) << " containing '" << needle << "'";
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
}

TEST(GenerationConfig, EosListPlusConfigEos) {
  // generation_config: [151645, 151643]; config.json: 151645.
  Loaded l = load("qwen2_5_1_5b_instruct");
  EXPECT_EQ(l.gen.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(l.gen.bos_token_id, 151643);
  EXPECT_EQ(l.gen.pad_token_id, 151643);
  EXPECT_TRUE(l.gen.do_sample);
  EXPECT_EQ(l.gen.temperature, 0.7);
  EXPECT_EQ(l.gen.top_p, 0.8);
  EXPECT_EQ(l.gen.top_k, 20);
  EXPECT_EQ(l.gen.repetition_penalty, 1.1);
  EXPECT_FALSE(l.gen.min_p.has_value());
  EXPECT_FALSE(l.gen.max_new_tokens.has_value());
}

TEST(GenerationConfig, EosIntMatchesConfig) {
  Loaded l = load("qwen2_5_vl_32b_instruct_awq");  // generation eos 151645 (int), config eos 151645
  EXPECT_EQ(l.gen.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(l.gen.pad_token_id, 151643);
  EXPECT_FALSE(l.gen.bos_token_id.has_value());  // neither file has one
  EXPECT_FALSE(l.gen.do_sample);
  EXPECT_FALSE(l.gen.temperature.has_value());
}

TEST(GenerationConfig, Qwen3AndQwenImage) {
  Loaded q3 = load("qwen3_0_6b");
  EXPECT_EQ(q3.gen.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(q3.gen.temperature, 0.6);
  EXPECT_EQ(q3.gen.top_p, 0.95);
  EXPECT_EQ(q3.gen.top_k, 20);
  Loaded qi = load("qwen_image_text_encoder");
  EXPECT_EQ(qi.gen.eos_token_ids, (std::vector<int32_t>{151645, 151643}));
  EXPECT_EQ(qi.gen.top_k, 1);
  EXPECT_EQ(qi.gen.top_p, 0.001);
  EXPECT_EQ(qi.gen.repetition_penalty, 1.05);
}

TEST(GenerationConfig, MissingFileFallsBackToConfigJson) {
  Loaded dense = load("qwen2_7b_instruct");  // no generation_config.json in the fixture
  EXPECT_EQ(dense.gen.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(dense.gen.bos_token_id, 151643);
  EXPECT_FALSE(dense.gen.pad_token_id.has_value());
  EXPECT_FALSE(dense.gen.do_sample);
  EXPECT_FALSE(dense.gen.temperature.has_value());
  EXPECT_FALSE(dense.gen.top_k.has_value());
  // Omni: the ids live in thinker_config.
  Loaded omni = load("qwen2_5_omni_7b");
  EXPECT_EQ(omni.gen.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(omni.gen.bos_token_id, 151644);
  EXPECT_EQ(omni.gen.pad_token_id, 151643);
  // Qwen3-VL: only text_config has them.
  Loaded vl = load("qwen3_vl_8b_instruct");
  EXPECT_EQ(vl.gen.eos_token_ids, std::vector<int32_t>{151645});
  EXPECT_EQ(vl.gen.bos_token_id, 151643);
}

ModelConfig tiny_model(json extra) {
  json j = {{"model_type", "qwen2"},        {"vocab_size", 64},       {"hidden_size", 32},
            {"intermediate_size", 64},      {"num_hidden_layers", 1}, {"num_attention_heads", 4},
            {"max_position_embeddings", 64}};
  if (extra.is_object()) j.update(extra);  // `{}` arrives as null
  auto c = parse_model_config(j);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.value();
}

TEST(GenerationConfig, UnionKeepsGenerationOrderFirst) {
  ModelConfig m = tiny_model({{"eos_token_id", {7, 5}}, {"bos_token_id", 1}, {"pad_token_id", 0}});
  auto g = parse_generation_config({{"eos_token_id", 5}, {"bos_token_id", 2}}, m);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{5, 7}));
  EXPECT_EQ(g->bos_token_id, 2);  // generation_config wins
  EXPECT_EQ(g->pad_token_id, 0);  // falls back to config.json
  g = parse_generation_config({{"eos_token_id", {9, 9, 7}}, {"max_new_tokens", 32}, {"min_p", 0.05}}, m);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->eos_token_ids, (std::vector<int32_t>{9, 7, 5}));
  EXPECT_EQ(g->max_new_tokens, 32);
  EXPECT_EQ(g->min_p, 0.05);
  g = parse_generation_config({{"eos_token_id", nullptr}}, tiny_model({}));
  ASSERT_TRUE(g.ok());
  EXPECT_TRUE(g->eos_token_ids.empty());
}

TEST(GenerationConfig, MalformedValuesNameTheField) {
  ModelConfig m = tiny_model({});
  expect_error(parse_generation_config({{"temperature", "hot"}}, m).status(), StatusCode::kInvalidArgument,
               "temperature");
  expect_error(parse_generation_config({{"eos_token_id", {1, "x"}}}, m).status(),
               StatusCode::kInvalidArgument, "eos_token_id");
  expect_error(parse_generation_config({{"eos_token_id", -3}}, m).status(), StatusCode::kInvalidArgument,
               "eos_token_id");
  expect_error(parse_generation_config({{"eos_token_id", 1LL << 40}}, m).status(),
               StatusCode::kInvalidArgument, "out of range");
  expect_error(parse_generation_config({{"top_p", 0.0}}, m).status(), StatusCode::kInvalidArgument, "top_p");
  expect_error(parse_generation_config({{"top_k", -1}}, m).status(), StatusCode::kInvalidArgument, "top_k");
  expect_error(parse_generation_config({{"top_k", 2.5}}, m).status(), StatusCode::kInvalidArgument, "top_k");
  expect_error(parse_generation_config({{"do_sample", "yes"}}, m).status(), StatusCode::kInvalidArgument,
               "do_sample");
  expect_error(parse_generation_config({{"repetition_penalty", 0}}, m).status(), StatusCode::kInvalidArgument,
               "repetition_penalty");
  expect_error(parse_generation_config(json::array(), m).status(), StatusCode::kInvalidArgument,
               "not a JSON object");

  testing::TempDir dir;
  testing::write_bytes(dir.file("generation_config.json"), "{oops");
  expect_error(load_generation_config(dir.path().string(), m).status(), StatusCode::kInvalidArgument,
               "generation_config.json");
  testing::write_bytes(dir.file("generation_config.json"), R"({"temperature": -1})");
  expect_error(load_generation_config(dir.path().string(), m).status(), StatusCode::kInvalidArgument,
               "generation_config.json: temperature must be >= 0");
}

}  // namespace
}  // namespace loom::models
