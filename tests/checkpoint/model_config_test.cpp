// config.json parsing: every fixture (as published and as transformers 5 re-saves it) against what
// transformers itself resolves (expected.json, from tests/fixtures/configs/make_reference.py), then
// the error paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "models/config/model_config.h"
#include "test_util.h"

namespace loom::models {
namespace {

using core::StatusCode;
using nlohmann::json;

const std::string kConfigs = std::string(LOOM_FIXTURES_DIR) + "/configs";

// Every fixture folder; the test below fails if a folder is added without being listed here.
const std::vector<std::string> kFixtures = {
    "qwen2_5_1_5b_instruct",
    "qwen2_5_7b_instruct_yarn",
    "qwen2_5_omni_7b",
    "qwen2_5_omni_7b_thinker",
    "qwen2_5_vl_32b_instruct_awq",
    "qwen2_7b_instruct",
    "qwen3_0_6b",
    "qwen3_vl_8b_instruct",
    "qwen_image_text_encoder",
    "synthetic_qwen2_5_omni_thinker",
    "synthetic_qwen2_5_vl_legacy",
    "synthetic_qwen2_5_vl_text_tie",
    "synthetic_qwen2_sliding",
    "synthetic_qwen3_linear",
    "synthetic_qwen3_vl",
};

ModelConfig load_ok(const std::string& dir) {
  auto cfg = load_model_config(dir);
  EXPECT_TRUE(cfg.ok()) << dir << ": " << cfg.status().to_string();
  return cfg.ok() ? cfg.value() : ModelConfig{};
}

void expect_matches(const ModelConfig& c, const json& e) {
  EXPECT_EQ(c.architecture, e["architecture"].get<std::string>());
  EXPECT_EQ(c.model_type, e["model_type"].get<std::string>());
  const json& t = e["text"];
  const TextConfig& x = c.text;
  EXPECT_EQ(x.model_type, t["model_type"].get<std::string>());
  EXPECT_EQ(x.vocab_size, t["vocab_size"].get<int64_t>());
  EXPECT_EQ(x.hidden_size, t["hidden_size"].get<int64_t>());
  EXPECT_EQ(x.intermediate_size, t["intermediate_size"].get<int64_t>());
  EXPECT_EQ(x.num_hidden_layers, t["num_hidden_layers"].get<int64_t>());
  EXPECT_EQ(x.num_attention_heads, t["num_attention_heads"].get<int64_t>());
  EXPECT_EQ(x.num_key_value_heads, t["num_key_value_heads"].get<int64_t>());
  EXPECT_EQ(x.head_dim, t["head_dim"].get<int64_t>());
  EXPECT_EQ(x.max_position_embeddings, t["max_position_embeddings"].get<int64_t>());
  EXPECT_EQ(x.rms_norm_eps, t["rms_norm_eps"].get<double>());
  EXPECT_EQ(x.hidden_act, t["hidden_act"].get<std::string>());
  EXPECT_EQ(x.tie_word_embeddings, t["tie_word_embeddings"].get<bool>());
  EXPECT_EQ(x.attention_bias, t["attention_bias"].get<bool>());
  EXPECT_EQ(x.qk_norm, t["qk_norm"].get<bool>());
  EXPECT_EQ(x.use_sliding_window, t["use_sliding_window"].get<bool>());
  EXPECT_EQ(x.sliding_window, t["sliding_window"].get<int64_t>());
  EXPECT_EQ(x.max_window_layers, t["max_window_layers"].get<int64_t>());
  EXPECT_EQ(x.layer_types, t["layer_types"].get<std::vector<std::string>>());
  const json& r = t["rope"];
  EXPECT_EQ(x.rope.type, r["type"].get<std::string>());
  EXPECT_EQ(x.rope.theta, r["theta"].get<double>());
  EXPECT_EQ(x.rope.factor, r["factor"].get<double>());
  EXPECT_EQ(x.rope.original_max_position_embeddings, r["original_max_position_embeddings"].get<int64_t>());
  EXPECT_EQ(x.rope.mrope_section, r["mrope_section"].get<std::vector<int>>());
  EXPECT_EQ(x.rope.mrope_interleaved, r["mrope_interleaved"].get<bool>());
  EXPECT_EQ(x.rope.partial_rotary_factor, r["partial_rotary_factor"].get<double>());
  EXPECT_EQ(c.image_token_id, e["image_token_id"].get<int64_t>());
  EXPECT_EQ(c.video_token_id, e["video_token_id"].get<int64_t>());
  EXPECT_EQ(c.audio_token_id, e["audio_token_id"].get<int64_t>());
  EXPECT_EQ(c.vision_start_token_id, e["vision_start_token_id"].get<int64_t>());
  EXPECT_EQ(c.vision_end_token_id, e["vision_end_token_id"].get<int64_t>());
  EXPECT_EQ(c.audio_start_token_id, e["audio_start_token_id"].get<int64_t>());
  EXPECT_EQ(c.audio_end_token_id, e["audio_end_token_id"].get<int64_t>());
}

TEST(ModelConfig, EveryFixtureIsListed) {
  std::vector<std::string> found;
  for (const auto& de : std::filesystem::directory_iterator(kConfigs)) {
    if (de.is_directory() && de.path().filename() != "tf5") found.push_back(de.path().filename().string());
  }
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, kFixtures);
}

// Both spellings of each config must resolve to exactly what transformers resolves.
TEST(ModelConfig, MatchesTransformersOnEveryFixture) {
  for (const std::string& name : kFixtures) {
    SCOPED_TRACE(name);
    const json expected = testing::read_json(kConfigs + "/" + name + "/expected.json");
    {
      SCOPED_TRACE("as published (transformers 4.x spelling)");
      expect_matches(load_ok(kConfigs + "/" + name), expected);
    }
    {
      SCOPED_TRACE("re-saved by transformers 5 (rope_parameters, dtype)");
      const std::string tf5 = kConfigs + "/tf5/" + name;
      const json raw = testing::read_json(tf5 + "/config.json");
      ASSERT_FALSE(raw.dump().find("rope_scaling") != std::string::npos)
          << "tf5 fixture still uses rope_scaling";
      expect_matches(load_ok(tf5), expected);
    }
  }
}

TEST(ModelConfig, Qwen25Dense) {
  ModelConfig c = load_ok(kConfigs + "/qwen2_5_1_5b_instruct");
  EXPECT_EQ(c.architecture, "Qwen2ForCausalLM");
  EXPECT_EQ(c.text.model_type, "qwen2");
  EXPECT_EQ(c.text.head_dim, 128);  // 1536 / 12: no head_dim key
  EXPECT_EQ(c.text.num_key_value_heads, 2);
  EXPECT_TRUE(c.text.attention_bias);  // implied for Qwen2
  EXPECT_FALSE(c.text.qk_norm);
  EXPECT_TRUE(c.text.tie_word_embeddings);
  EXPECT_EQ(c.text.rope.theta, 1000000.0);
  EXPECT_EQ(c.text.rope.type, "default");
  EXPECT_EQ(c.text.sliding_window, 0);  // present in the file, but use_sliding_window is false
  EXPECT_EQ(c.text.dtype, "bfloat16");
  EXPECT_TRUE(c.vision_raw.is_null());
  EXPECT_EQ(c.image_token_id, -1);
  EXPECT_EQ(c.raw["transformers_version"], "4.43.1");
}

TEST(ModelConfig, Qwen3Dense) {
  ModelConfig c = load_ok(kConfigs + "/qwen3_0_6b");
  EXPECT_EQ(c.text.model_type, "qwen3");
  EXPECT_EQ(c.text.hidden_size, 1024);
  EXPECT_EQ(c.text.head_dim, 128);  // explicit, != 1024 / 16
  EXPECT_EQ(c.text.num_key_value_heads, 8);
  EXPECT_FALSE(c.text.attention_bias);
  EXPECT_TRUE(c.text.qk_norm);
  EXPECT_TRUE(c.text.tie_word_embeddings);
  EXPECT_EQ(c.text.max_position_embeddings, 40960);
}

TEST(ModelConfig, Qwen25VLBothLayouts) {
  // 4.49 checkpoint: text fields at the top level.
  ModelConfig old = load_ok(kConfigs + "/qwen2_5_vl_32b_instruct_awq");
  EXPECT_EQ(old.text.model_type, "qwen2_5_vl_text");
  EXPECT_EQ(old.text.num_hidden_layers, 64);
  EXPECT_EQ(old.text.hidden_size, 5120);
  EXPECT_EQ(old.text.rope.mrope_section, (std::vector<int>{16, 24, 24}));
  EXPECT_FALSE(old.text.rope.mrope_interleaved);
  EXPECT_TRUE(old.text.attention_bias);
  EXPECT_EQ(old.image_token_id, 151655);
  EXPECT_EQ(old.video_token_id, 151656);
  EXPECT_EQ(old.vision_start_token_id, 151652);
  EXPECT_EQ(old.vision_end_token_id, 151653);
  EXPECT_EQ(old.vision_raw["out_hidden_size"], 5120);
  EXPECT_EQ(old.raw["quantization_config"]["quant_method"], "awq");
  // 4.53 checkpoint: text_config nested (and stale duplicates at the top level).
  ModelConfig nested = load_ok(kConfigs + "/qwen_image_text_encoder");
  EXPECT_EQ(nested.text.hidden_size, 3584);
  EXPECT_EQ(nested.text.num_key_value_heads, 4);
  EXPECT_EQ(nested.text.max_position_embeddings, 128000);
  EXPECT_EQ(nested.text.rope.mrope_section, (std::vector<int>{16, 24, 24}));
  EXPECT_EQ(nested.text.dtype, "bfloat16");  // the top level's, not text_config's stale float32
  EXPECT_EQ(nested.vision_raw["depth"], 32);
}

TEST(ModelConfig, Qwen3VL) {
  ModelConfig c = load_ok(kConfigs + "/qwen3_vl_8b_instruct");
  EXPECT_EQ(c.text.model_type, "qwen3_vl_text");
  EXPECT_EQ(c.text.num_hidden_layers, 36);
  EXPECT_EQ(c.text.rope.theta, 5000000.0);
  EXPECT_EQ(c.text.rope.mrope_section, (std::vector<int>{24, 20, 20}));
  EXPECT_TRUE(c.text.rope.mrope_interleaved);
  EXPECT_TRUE(c.text.qk_norm);
  EXPECT_FALSE(c.text.attention_bias);
  EXPECT_FALSE(c.text.use_sliding_window);
  EXPECT_EQ(c.text.dtype, "bfloat16");  // only text_config states it
  EXPECT_EQ(c.vision_raw["deepstack_visual_indexes"], json({8, 16, 24}));
  EXPECT_EQ(c.audio_token_id, -1);
}

TEST(ModelConfig, Qwen25OmniFullAndThinkerOnly) {
  for (const char* name : {"qwen2_5_omni_7b", "qwen2_5_omni_7b_thinker"}) {
    SCOPED_TRACE(name);
    ModelConfig c = load_ok(kConfigs + "/" + name);
    EXPECT_EQ(c.text.model_type, "qwen2_5_omni_text");
    EXPECT_EQ(c.text.vocab_size, 152064);
    EXPECT_EQ(c.text.hidden_size, 3584);
    EXPECT_EQ(c.text.rope.mrope_section, (std::vector<int>{16, 24, 24}));
    EXPECT_FALSE(c.text.tie_word_embeddings);  // the thinker's flag, not text_config's class default
    EXPECT_EQ(c.image_token_id, 151655);       // image_token_index
    EXPECT_EQ(c.video_token_id, 151656);
    EXPECT_EQ(c.audio_token_id, 151646);
    EXPECT_EQ(c.audio_start_token_id, 151647);
    EXPECT_EQ(c.audio_end_token_id, 151648);
    EXPECT_EQ(c.vision_start_token_id, 151652);
    EXPECT_EQ(c.vision_end_token_id, 151653);
    EXPECT_EQ(c.vision_raw["window_size"], 112);
    EXPECT_EQ(c.audio_raw["d_model"], 1280);
  }
  EXPECT_EQ(load_ok(kConfigs + "/qwen2_5_omni_7b").architecture, "Qwen2_5OmniModel");
}

TEST(ModelConfig, YarnAndLinearRope) {
  ModelConfig y = load_ok(kConfigs + "/qwen2_5_7b_instruct_yarn");
  EXPECT_EQ(y.text.rope.type, "yarn");  // spelled "type" in the file
  EXPECT_EQ(y.text.rope.factor, 4.0);
  EXPECT_EQ(y.text.rope.original_max_position_embeddings, 32768);
  EXPECT_EQ(y.text.rope.beta_fast, 32.0);
  EXPECT_EQ(y.text.rope.beta_slow, 1.0);
  EXPECT_EQ(y.text.rope.attention_factor, 0.0);
  ModelConfig l = load_ok(kConfigs + "/synthetic_qwen3_linear");
  EXPECT_EQ(l.text.rope.type, "linear");
  EXPECT_EQ(l.text.rope.factor, 2.0);
  EXPECT_EQ(l.text.head_dim, 128);  // Qwen3Config's default when head_dim is absent
  EXPECT_TRUE(l.text.attention_bias);
}

TEST(ModelConfig, SlidingWindowLayerTypesAreDerived) {
  ModelConfig c = load_ok(kConfigs + "/synthetic_qwen2_sliding");
  EXPECT_TRUE(c.text.use_sliding_window);
  EXPECT_EQ(c.text.sliding_window, 16);
  EXPECT_EQ(c.text.layer_types, (std::vector<std::string>{"full_attention", "full_attention",
                                                          "sliding_attention", "sliding_attention"}));
}

// --- inline configs: transformers-5 spellings and defaults -------------------------------------

json tiny_qwen3() {
  return json{{"model_type", "qwen3"},    {"vocab_size", 64},       {"hidden_size", 32},
              {"intermediate_size", 64},  {"num_hidden_layers", 2}, {"num_attention_heads", 4},
              {"num_key_value_heads", 2}, {"head_dim", 8},          {"max_position_embeddings", 128}};
}

core::Expected<ModelConfig> parse(const json& j) {
  return parse_model_config(j);
}

void expect_error(const core::Status& st, StatusCode code, const std::string& needle) {
  ASSERT_FALSE(st.ok()) << "expected " << core::status_code_name(code) << " containing '" << needle << "'";
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.to_string();
}

TEST(ModelConfig, RopeParametersSpelling) {
  json j = tiny_qwen3();
  j["rope_parameters"] = {
      {"rope_type", "yarn"}, {"rope_theta", 1e6},        {"factor", 8.0},
      {"beta_fast", 16},     {"attention_factor", 1.25}, {"original_max_position_embeddings", 64}};
  j["dtype"] = "float16";
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->text.rope.type, "yarn");
  EXPECT_EQ(c->text.rope.theta, 1e6);
  EXPECT_EQ(c->text.rope.factor, 8.0);
  EXPECT_EQ(c->text.rope.beta_fast, 16.0);
  EXPECT_EQ(c->text.rope.attention_factor, 1.25);
  EXPECT_EQ(c->text.rope.original_max_position_embeddings, 64);
  EXPECT_EQ(c->text.dtype, "float16");
  // rope_theta next to rope_parameters fills a missing theta; a missing original length is the
  // model's max_position_embeddings, as transformers standardises it.
  j["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 2.0}};
  j["rope_theta"] = 5000;
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->text.rope.theta, 5000.0);
  EXPECT_EQ(c->text.rope.original_max_position_embeddings, 128);
  // Neither: the class default theta (Qwen3Config: 10000).
  j.erase("rope_theta");
  j.erase("rope_parameters");
  c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text.rope.theta, 10000.0);
  EXPECT_EQ(c->text.rope.type, "default");
  // Per-layer-type nesting (transformers 5 for hybrid models): the full-attention entry is used.
  j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 7.0e5}}}};
  c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->text.rope.theta, 7.0e5);
  // partial rotary, in rope_parameters or beside it.
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e4}, {"partial_rotary_factor", 0.5}};
  EXPECT_EQ(parse(j)->text.rope.partial_rotary_factor, 0.5);
  j.erase("rope_parameters");
  j["partial_rotary_factor"] = 0.25;
  EXPECT_EQ(parse(j)->text.rope.partial_rotary_factor, 0.25);
}

TEST(ModelConfig, Llama3Rope) {
  json j = tiny_qwen3();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  auto c = parse(j);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->text.rope.type, "llama3");
  EXPECT_EQ(c->text.rope.original_max_position_embeddings, 8192);
  j["rope_scaling"].erase("high_freq_factor");
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "high_freq_factor");
}

TEST(ModelConfig, DefaultsWhenKeysAreAbsent) {
  json j = tiny_qwen3();
  j.erase("num_key_value_heads");  // -> num_attention_heads (MHA)
  j.erase("head_dim");
  auto c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text.num_key_value_heads, 4);
  EXPECT_EQ(c->text.head_dim, 128);
  EXPECT_EQ(c->text.rms_norm_eps, 1e-6);
  EXPECT_EQ(c->text.hidden_act, "silu");
  EXPECT_FALSE(c->text.tie_word_embeddings);
  EXPECT_EQ(c->text.layer_types.size(), 2u);
  EXPECT_EQ(c->architecture, "");
  EXPECT_EQ(c->text.dtype, "");
  j["model_type"] = "qwen2";
  j["num_key_value_heads"] = nullptr;  // null means absent
  c = parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->text.head_dim, 8);  // hidden / heads for the Qwen2 family
  EXPECT_EQ(c->text.num_key_value_heads, 4);
}

TEST(ModelConfig, UnsupportedThings) {
  json j = tiny_qwen3();
  j["model_type"] = "llama";
  expect_error(parse(j).status(), StatusCode::kUnsupported, "'llama'");
  j = tiny_qwen3();
  j["rope_scaling"] = {{"rope_type", "longrope"}, {"factor", 2.0}};
  expect_error(parse(j).status(), StatusCode::kUnsupported, "longrope");
  j = {{"model_type", "qwen3_vl"}, {"text_config", tiny_qwen3()}};
  j["text_config"]["model_type"] = "qwen3_5_text";
  expect_error(parse(j).status(), StatusCode::kUnsupported, "text_config.model_type 'qwen3_5_text'");
  j = tiny_qwen3();
  j["layer_types"] = {"full_attention", "linear_attention"};
  expect_error(parse(j).status(), StatusCode::kUnsupported, "linear_attention");
}

TEST(ModelConfig, MissingAndMistypedFieldsNameTheField) {
  json j = tiny_qwen3();
  j.erase("hidden_size");
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "hidden_size is missing");
  j = tiny_qwen3();
  j["hidden_size"] = "big";
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "hidden_size: expected an integer");
  j = tiny_qwen3();
  j["rms_norm_eps"] = "1e-6";
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "rms_norm_eps: expected a number");
  j = tiny_qwen3();
  j["max_position_embeddings"] = 128.5;
  expect_error(parse(j).status(), StatusCode::kInvalidArgument,
               "max_position_embeddings: expected an integer");
  j = tiny_qwen3();
  j["tie_word_embeddings"] = 1;
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "tie_word_embeddings: expected a boolean");
  j = tiny_qwen3();
  j.erase("model_type");
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "model_type is missing");
  j = tiny_qwen3();
  j["eos_token_id"] = {1, "two"};
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "eos_token_id");
  j = tiny_qwen3();
  j["architectures"] = "Qwen3ForCausalLM";
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "architectures");
  expect_error(parse(json::array()).status(), StatusCode::kInvalidArgument, "not a JSON object");

  // Nested paths are named in full.
  json vl = {{"model_type", "qwen3_vl"}};
  expect_error(parse(vl).status(), StatusCode::kInvalidArgument, "text_config is missing");
  vl["text_config"] = tiny_qwen3();
  vl["text_config"].erase("model_type");
  vl["text_config"].erase("vocab_size");
  expect_error(parse(vl).status(), StatusCode::kInvalidArgument, "text_config.vocab_size is missing");
  json omni = {{"model_type", "qwen2_5_omni"}};
  expect_error(parse(omni).status(), StatusCode::kInvalidArgument, "thinker_config is missing");
  omni["thinker_config"] = {{"text_config", tiny_qwen3()}, {"image_token_index", "x"}};
  omni["thinker_config"]["text_config"].erase("model_type");
  expect_error(parse(omni).status(), StatusCode::kInvalidArgument, "thinker_config.image_token_index");
  omni["thinker_config"]["image_token_index"] = 5;
  omni["thinker_config"]["text_config"]["num_attention_heads"] = nullptr;
  expect_error(parse(omni).status(), StatusCode::kInvalidArgument,
               "thinker_config.text_config.num_attention_heads is missing");
}

TEST(ModelConfig, InconsistentValues) {
  json j = tiny_qwen3();
  j["num_key_value_heads"] = 3;
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "num_key_value_heads");
  j = tiny_qwen3();
  j["num_hidden_layers"] = 0;
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "num_hidden_layers must be positive");
  j = tiny_qwen3();
  j["model_type"] = "qwen2";
  j.erase("head_dim");
  j["num_attention_heads"] = 5;
  j["num_key_value_heads"] = 5;
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "not divisible");
  j = tiny_qwen3();
  j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {1, 1, 1}}};  // 3 pairs for head_dim 8 (4 pairs)
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "mrope_section sums to 3");
  j["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {1, -1, 4}}};
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "mrope_section");
  j = tiny_qwen3();
  j["rope_scaling"] = {{"type", "yarn"}};
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "rope_scaling.factor is missing");
  j = tiny_qwen3();
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", -1}};
  expect_error(parse(j).status(), StatusCode::kInvalidArgument,
               "rope_parameters.rope_theta must be positive");
  j = tiny_qwen3();
  j["layer_types"] = {"full_attention"};
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "layer_types");
  j = tiny_qwen3();
  j["partial_rotary_factor"] = 1.5;
  expect_error(parse(j).status(), StatusCode::kInvalidArgument, "partial_rotary_factor");
}

TEST(ModelConfig, LoadErrors) {
  testing::TempDir dir;
  expect_error(load_model_config(dir.path().string()).status(), StatusCode::kNotFound, "config.json");
  testing::write_bytes(dir.file("config.json"), "{\"model_type\": ");
  expect_error(load_model_config(dir.path().string()).status(), StatusCode::kInvalidArgument,
               "not valid JSON");
  testing::write_bytes(dir.file("config.json"), R"({"model_type": "gpt2"})");
  auto st = load_model_config(dir.path().string()).status();
  expect_error(st, StatusCode::kUnsupported, "'gpt2'");
  EXPECT_NE(st.message().find("config.json"), std::string::npos) << "errors carry the file path";
}

}  // namespace
}  // namespace loom::models
