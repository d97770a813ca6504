// Chat templates of real models rendered over a conversation corpus must be byte-identical to
// transformers' apply_chat_template (goldens in tests/fixtures/template_corpus/goldens.json, rendered by
// tools/reference/render_templates.py). Where transformers raised, ChatTemplate::render must return an
// error too. Plus the API rules of ChatTemplate (template lookup in a model directory, tool_use
// selection, input validation, error statuses).
#include "text/chat_template.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "fixture_util.h"

namespace loom::text {
namespace {

using nlohmann::ordered_json;
using testing::fixture_path;
using testing::load_json_fixture;

struct Corpus {
  ordered_json conversations;  // id -> conversation
  ordered_json variants;
  ordered_json goldens;
  int64_t now = 0;
};

const Corpus& corpus() {
  static const Corpus c = [] {
    Corpus out;
    auto conv = load_json_fixture("template_corpus/conversations.json");
    out.variants = conv["variants"];
    out.conversations = ordered_json::object();
    for (const auto& x : conv["conversations"]) out.conversations[x["id"].get<std::string>()] = x;
    auto g = load_json_fixture("template_corpus/goldens.json");
    out.goldens = g["goldens"];
    out.now = g["now_epoch_seconds"].get<int64_t>();
    return out;
  }();
  return c;
}

std::vector<std::string> template_names() {
  std::set<std::string> names;
  for (const auto& g : corpus().goldens) names.insert(g["template"].get<std::string>());
  return {names.begin(), names.end()};
}

class TemplateCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(TemplateCorpus, MatchesTransformers) {
  const std::string model = GetParam();
  auto tmpl = ChatTemplate::from_model_dir(fixture_path("templates/" + model));
  ASSERT_TRUE(tmpl.ok()) << tmpl.status().to_string();
  int outputs = 0, errors = 0;
  for (const auto& g : corpus().goldens) {
    if (g["template"] != model) continue;
    const std::string conv_id = g["conversation"].get<std::string>();
    const std::string variant_id = g["variant"].get<std::string>();
    SCOPED_TRACE(model + " / " + conv_id + " / " + variant_id);
    const auto& conv = corpus().conversations[conv_id];
    const auto& variant = corpus().variants[variant_id];
    ChatTemplateOptions opts;
    opts.add_generation_prompt = variant["add_generation_prompt"].get<bool>();
    if (conv.contains("tools")) opts.tools = conv["tools"];
    if (conv.contains("documents")) opts.documents = conv["documents"];
    if (variant.contains("extra")) opts.extra_context = variant["extra"];
    opts.now_epoch_seconds = corpus().now;
    auto out = tmpl->render(conv["messages"], opts);
    if (g.contains("error")) {
      EXPECT_FALSE(out.ok()) << "transformers raised " << g["error"].get<std::string>()
                             << " but Loom rendered:\n"
                             << *out;
      ++errors;
    } else {
      if (!out.ok()) {
        ADD_FAILURE() << out.status().to_string();
        continue;
      }
      EXPECT_EQ(*out, g["output"].get<std::string>());
      ++outputs;
    }
  }
  EXPECT_GT(outputs, 30) << "too few successful renders for " << model;
}

INSTANTIATE_TEST_SUITE_P(Models, TemplateCorpus, ::testing::ValuesIn(template_names()), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return n;
});

TEST(ChatTemplate, CorpusCoversEveryVendoredTemplate) {
  std::set<std::string> dirs;
  for (const auto& e : std::filesystem::directory_iterator(fixture_path("templates"))) {
    if (e.is_directory()) dirs.insert(e.path().filename().string());
  }
  auto names = template_names();
  EXPECT_EQ(dirs, std::set<std::string>(names.begin(), names.end()));
  EXPECT_GE(names.size(), 10u);
}

TEST(ChatTemplate, ModelDirSourcesAndSpecialTokens) {
  // chat_template.jinja + tokenizer_config.json special tokens
  auto llama = ChatTemplate::from_model_dir(fixture_path("templates/llama-3.3-70b-instruct"));
  ASSERT_TRUE(llama.ok()) << llama.status().to_string();
  auto out = llama->render(ordered_json::parse(R"([{"role":"user","content":"hi"}])"), {});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(out->rfind("<|begin_of_text|><|start_header_id|>system<|end_header_id|>", 0), 0u) << *out;
  // chat_template.json (processor format)
  auto vl = ChatTemplate::from_model_dir(fixture_path("templates/qwen2.5-vl-7b-instruct"));
  ASSERT_TRUE(vl.ok()) << vl.status().to_string();
  EXPECT_NE(vl->source().find("<|vision_start|><|image_pad|><|vision_end|>"), std::string::npos);
  // tokenizer_config.json with a list of named templates
  auto hermes = ChatTemplate::from_model_dir(fixture_path("templates/hermes-3-llama-3.1-70b"));
  ASSERT_TRUE(hermes.ok()) << hermes.status().to_string();
  EXPECT_EQ(hermes->template_names(), (std::vector<std::string>{"default", "tool_use"}));
}

TEST(ChatTemplate, ToolUseTemplateIsChosenWhenToolsAreGiven) {
  auto t = ChatTemplate::from_model_dir(fixture_path("templates/hermes-3-llama-3.1-70b"));
  ASSERT_TRUE(t.ok());
  const auto msgs = ordered_json::parse(R"([{"role":"user","content":"hi"}])");
  ChatTemplateOptions plain;
  auto a = t->render(msgs, plain);
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  EXPECT_EQ(a->find("<tools>"), std::string::npos);
  ChatTemplateOptions with_tools;
  with_tools.tools = ordered_json::parse(
      R"([{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{}}}}])");
  auto b = t->render(msgs, with_tools);
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  EXPECT_NE(b->find("<tools>"), std::string::npos);
}

TEST(ChatTemplate, InputValidation) {
  auto t = ChatTemplate::from_source("{{ messages[0].content }}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->render(ordered_json::array(), {}).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->render(ordered_json::object(), {}).status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(t->render(ordered_json::parse(R"(["not a dict"])"), {}).status().code(),
            core::StatusCode::kInvalidArgument);
  ChatTemplateOptions bad_tools;
  bad_tools.tools = ordered_json::parse(R"({"not": "a list"})");
  EXPECT_FALSE(t->render(ordered_json::parse(R"([{"role":"user","content":"x"}])"), bad_tools).ok());
  ChatTemplateOptions clash;
  clash.extra_context = ordered_json::parse(R"({"messages": []})");
  EXPECT_FALSE(t->render(ordered_json::parse(R"([{"role":"user","content":"x"}])"), clash).ok());
}

TEST(ChatTemplate, NoneValuedKeysAreDroppedAndReasoningAliased) {
  auto t = ChatTemplate::from_source(
      "{% for m in messages %}{{ m|tojson }}{{ m.content is defined }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  auto out =
      t->render(ordered_json::parse(
                    R"([{"role":"assistant","content":null,"reasoning_content":"r","tool_calls":null}])"),
                {});
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, R"({"thinking": "r", "role": "assistant", "reasoning_content": "r"}False)");
}

TEST(ChatTemplate, TemplateErrorsBecomeStatuses) {
  auto t = ChatTemplate::from_source(
      "line one\n{{ raise_exception('Only user and assistant roles are supported!') }}");
  ASSERT_TRUE(t.ok());
  auto out = t->render(ordered_json::parse(R"([{"role":"user","content":"x"}])"), {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("Only user and assistant roles are supported!"), std::string::npos)
      << out.status().message();
  EXPECT_NE(out.status().message().find("line 2"), std::string::npos) << out.status().message();

  auto syntax = ChatTemplate::from_source("ok\n{% for x in y %}\n{{ x }");
  ASSERT_FALSE(syntax.ok());
  EXPECT_EQ(syntax.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(syntax.status().message().find("line 3"), std::string::npos) << syntax.status().message();
}

TEST(ChatTemplate, MissingDirectoryOrTemplate) {
  EXPECT_EQ(ChatTemplate::from_model_dir(fixture_path("templates/does-not-exist")).status().code(),
            core::StatusCode::kNotFound);
  auto dir = std::filesystem::path(LOOM_BINARY_DIR) / "jinja_test_empty_model";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "</s>"})";
  EXPECT_EQ(ChatTemplate::from_model_dir(dir.string()).status().code(), core::StatusCode::kNotFound);
}

TEST(ChatTemplate, AcceptsPlainJsonWithSortedKeys) {
  // nlohmann::json converts implicitly; its objects are key-sorted, ordered_json keeps caller order.
  auto t = ChatTemplate::from_source("{{ messages[0]|tojson }}{{ tools[0]|tojson }}");
  ASSERT_TRUE(t.ok());
  nlohmann::json messages = nlohmann::json::parse(R"([{"role": "user", "content": "x"}])");
  ChatTemplateOptions opts;
  opts.tools = nlohmann::json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  auto out = t->render(messages, opts);
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out, R"({"content": "x", "role": "user"}{"function": {"name": "f"}, "type": "function"})");
  opts.tools = ordered_json::parse(R"([{"type": "function", "function": {"name": "f"}}])");
  out = t->render(ordered_json::parse(R"([{"role": "user", "content": "x"}])"), opts);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, R"({"role": "user", "content": "x"}{"type": "function", "function": {"name": "f"}})");
}

TEST(ChatTemplate, StrftimeNowUsesTheFixedClock) {
  auto t = ChatTemplate::from_source("{{ strftime_now('%Y-%m-%d %H:%M') }}");
  ASSERT_TRUE(t.ok());
  ChatTemplateOptions opts;
  opts.now_epoch_seconds = 0;
  auto out = t->render(ordered_json::parse(R"([{"role":"user","content":"x"}])"), opts);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "1970-01-01 00:00");
  opts.now_epoch_seconds.reset();  // real clock: a plausible date
  out = t->render(ordered_json::parse(R"([{"role":"user","content":"x"}])"), opts);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->size(), 16u);
  EXPECT_GE(out->substr(0, 4), "2024");
}

}  // namespace
}  // namespace loom::text
