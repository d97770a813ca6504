// Multimodal chat templates render exactly as transformers' processor apply_chat_template renders them
// (goldens: tools/reference/render_mm_templates.py -> tests/fixtures/requests_mm/goldens.json; exact text).
#include <gtest/gtest.h>

#include "server/chat_service.h"
#include "test_util.h"

namespace loom::server {
namespace {

using nlohmann::ordered_json;
using testing::conversation;
using testing::fixture_path;
using testing::load_json_fixture;
using testing::parse_ok;

TEST(RenderMm, MatchesTransformersGoldens) {
  const auto goldens = load_json_fixture("requests_mm/goldens.json");
  const auto corpus = load_json_fixture("requests_mm/conversations.json");
  ASSERT_GE(goldens["goldens"].size(), 50u);
  int checked = 0;
  for (const auto& g : goldens["goldens"]) {
    const std::string tname = g["template"], conv = g["conversation"], variant = g["variant"];
    SCOPED_TRACE(tname + " / " + conv + " / " + variant);
    auto tpl = text::ChatTemplate::from_model_dir(fixture_path("templates/" + tname));
    ASSERT_TRUE(tpl.ok()) << tpl.status().to_string();
    ASSERT_TRUE(template_takes_content_parts(*tpl));
    ordered_json body = conversation(conv);
    const ordered_json& v = corpus["variants"][variant];
    body["add_generation_prompt"] = v["add_generation_prompt"];
    if (!v["extra"].empty()) body["chat_template_kwargs"] = v["extra"];
    const ChatRequest req = parse_ok(body);
    auto out = render_chat_prompt(*tpl, true, req);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_EQ(*out, g["output"].get<std::string>());
    ++checked;
  }
  EXPECT_EQ(checked, 3 * 6 * 3);  // templates x conversations x variants
}

TEST(RenderMm, TemplateMessagesNormaliseOpenAiParts) {
  const ordered_json in = ordered_json::parse(R"([
    {"role": "user", "content": [
      {"type": "image_url", "image_url": {"url": "/a.png", "detail": "high"}},
      {"type": "image_url", "image_url": "/b.png"},
      {"type": "video_url", "video_url": {"url": "/v.mp4"}},
      {"type": "video_url", "video_url": "/w.mp4"},
      {"type": "video", "video": ["/f1.png", "/f2.png"]},
      {"type": "image", "image": "/c.png"},
      {"type": "text", "text": "hi"}]},
    {"role": "assistant", "content": "ok"}])");
  const ordered_json want = ordered_json::parse(R"([
    {"role": "user", "content": [
      {"type": "image", "url": "/a.png"},
      {"type": "image", "url": "/b.png"},
      {"type": "video", "url": "/v.mp4"},
      {"type": "video", "url": "/w.mp4"},
      {"type": "video", "video": ["/f1.png", "/f2.png"]},
      {"type": "image", "image": "/c.png"},
      {"type": "text", "text": "hi"}]},
    {"role": "assistant", "content": "ok"}])");
  EXPECT_EQ(template_messages(in).dump(), want.dump());
}

TEST(RenderMm, TextTemplatesRefuseMedia) {
  auto tpl = text::ChatTemplate::from_model_dir(fixture_path("templates/qwen2.5-7b-instruct"));
  ASSERT_TRUE(tpl.ok());
  ASSERT_FALSE(template_takes_content_parts(*tpl));
  auto out = render_chat_prompt(*tpl, false, parse_ok(conversation("one_image_url")));
  EXPECT_EQ(out.status().code(), core::StatusCode::kUnsupported);
  EXPECT_NE(out.status().message().find("'image_url'"), std::string::npos) << out.status().message();
}

TEST(RenderMm, ContinueFinalMessageWithMediaEarlier) {
  auto tpl = text::ChatTemplate::from_model_dir(fixture_path("templates/qwen2.5-vl-7b-instruct"));
  ASSERT_TRUE(tpl.ok());
  ordered_json body = conversation("one_image_url");
  body["messages"].push_back({{"role", "assistant"}, {"content", "It shows"}});
  body["continue_final_message"] = true;
  body["add_generation_prompt"] = false;
  auto out = render_chat_prompt(*tpl, true, parse_ok(body));
  ASSERT_TRUE(out.ok()) << out.status().to_string();
  EXPECT_EQ(*out,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
            "<|vision_start|><|image_pad|><|vision_end|>What is in this image?<|im_end|>\n"
            "<|im_start|>assistant\nIt shows");
}

}  // namespace
}  // namespace loom::server
