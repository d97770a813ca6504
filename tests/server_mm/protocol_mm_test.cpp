// Validation of multimodal content parts, mm_processor_kwargs, --limit-mm-per-prompt parsing and the
// per-prompt media limits (server/openai_protocol.h).
#include <gtest/gtest.h>

#include "server/openai_protocol.h"
#include "test_util.h"

namespace loom::server {
namespace {

using nlohmann::ordered_json;
using testing::conversation;
using testing::load_json_fixture;
using testing::parse_ok;

ordered_json one_user(ordered_json parts) {
  return {{"messages", ordered_json::array({{{"role", "user"}, {"content", std::move(parts)}}})}};
}

core::Status parse_status(const ordered_json& body) {
  auto r = parse_chat_request(body, engine::SamplingDefaults{});
  return r.ok() ? core::Status() : r.status();
}

TEST(ProtocolMm, EveryCorpusConversationIsValid) {
  const auto all = load_json_fixture("requests_mm/conversations.json");
  ASSERT_GE(all["conversations"].size(), 6u);
  for (const auto& c : all["conversations"]) {
    SCOPED_TRACE(c["id"].get<std::string>());
    parse_ok(c["request"]);
  }
}

TEST(ProtocolMm, AcceptsEveryPartForm) {
  const ordered_json parts = ordered_json::parse(R"([
    {"type": "text", "text": "hi"},
    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
    {"type": "image_url", "image_url": {"url": "/a.png", "detail": "low"}},
    {"type": "image_url", "image_url": {"url": "/a.png", "detail": null}},
    {"type": "image_url", "image_url": "file:///a.png"},
    {"type": "video_url", "video_url": {"url": "/v.mp4"}},
    {"type": "video_url", "video_url": "/v.mp4"},
    {"type": "image", "image": "/a.png"},
    {"type": "image", "url": "/a.png"},
    {"type": "video", "video": "/v.mp4"},
    {"type": "video", "url": "/v.mp4"},
    {"type": "video", "video": ["/f1.png", "/f2.png"]}
  ])");
  const ChatRequest r = parse_ok(one_user(parts));
  EXPECT_EQ(r.messages[0]["content"], parts);  // kept as sent
}

struct BadPart {
  const char* parts;  // JSON array of parts of messages[0]
  const char* field;  // the field the message must name
  const char* what;   // and a fragment of the explanation
};

TEST(ProtocolMm, ErrorsNameTheField) {
  const BadPart cases[] = {
      {R"([{"type": "image_url"}])", "'messages[0].content[0].image_url' is required", ""},
      {R"([{"type": "image_url", "image_url": null}])", "'messages[0].content[0].image_url' is required", ""},
      {R"([{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}])",
       "'messages[0].content[1].image_url.url' is required", ""},
      {R"([{"type": "image_url", "image_url": {"url": 3}}])", "'messages[0].content[0].image_url.url'",
       "must be a string"},
      {R"([{"type": "image_url", "image_url": {"url": ""}}])", "'messages[0].content[0].image_url.url'",
       "must not be empty"},
      {R"([{"type": "image_url", "image_url": ""}])", "'messages[0].content[0].image_url'",
       "must not be empty"},
      {R"([{"type": "image_url", "image_url": 7}])", "'messages[0].content[0].image_url'",
       "must be an object"},
      {R"([{"type": "image_url", "image_url": {"url": "/a", "detail": "max"}}])",
       "'messages[0].content[0].image_url.detail'", "auto, low, high"},
      {R"([{"type": "video_url", "video_url": {"uri": "/a"}}])", "'messages[0].content[0].video_url.url'",
       "is required"},
      {R"([{"type": "video_url", "video_url": ["/a"]}])", "'messages[0].content[0].video_url'",
       "must be an object"},
      {R"([{"type": "video", "video": []}])", "'messages[0].content[0].video'", "empty list of frames"},
      {R"([{"type": "video", "video": ["/a.png", 5]}])", "'messages[0].content[0].video[1]'",
       "must be a string"},
      {R"([{"type": "video", "video": ["/a.png", ""]}])", "'messages[0].content[0].video[1]'",
       "must not be empty"},
      {R"([{"type": "video", "video": {"url": "/a"}}])", "'messages[0].content[0].video'",
       "list of frame URLs"},
      {R"([{"type": "video"}])", "'messages[0].content[0]'", "exactly one of 'video' or 'url'"},
      {R"([{"type": "image", "image": "/a", "url": "/b"}])", "'messages[0].content[0]'",
       "exactly one of 'image' or 'url'"},
      {R"([{"type": "image", "image": ["/a"]}])", "'messages[0].content[0].image'", "must be a string"},
      {R"([{"type": "image", "url": 1}])", "'messages[0].content[0].url'", "must be a string"},
      {R"([{"type": "picture", "url": "/a"}])", "'messages[0].content[0].type'", "unknown content part type"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.parts);
    const core::Status st = parse_status(one_user(ordered_json::parse(c.parts)));
    EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find(c.field), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(c.what), std::string::npos) << st.message();
  }
}

TEST(ProtocolMm, ErrorInALaterMessageNamesItsIndex) {
  ordered_json body = conversation("multi_turn");
  body["messages"][3]["content"][2] = {{"type", "video_url"}, {"video_url", {{"url", false}}}};
  const core::Status st = parse_status(body);
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'messages[3].content[2].video_url.url' must be a string"), std::string::npos)
      << st.message();
}

TEST(ProtocolMm, MmProcessorKwargsKeptAsSent) {
  ordered_json body = conversation("video_url");
  body["mm_processor_kwargs"] =
      ordered_json::parse(R"({"max_pixels": 50176, "fps": 1.5, "min_pixels": 3136})");
  const ChatRequest r = parse_ok(body);
  EXPECT_EQ(r.mm_processor_kwargs.dump(), R"({"max_pixels":50176,"fps":1.5,"min_pixels":3136})");
  body.erase("mm_processor_kwargs");
  EXPECT_TRUE(parse_ok(body).mm_processor_kwargs.empty());
  EXPECT_TRUE(parse_ok(body).mm_processor_kwargs.is_object());
  body["mm_processor_kwargs"] = nullptr;
  EXPECT_TRUE(parse_ok(body).mm_processor_kwargs.is_object());
  body["mm_processor_kwargs"] = "fps=2";
  const core::Status st = parse_status(body);
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'mm_processor_kwargs' must be an object"), std::string::npos);
}

TEST(ProtocolMm, LimitMmPerPromptForms) {
  struct Case {
    const char* spec;
    int images, videos;
  };
  const Case ok[] = {
      {"image=3,video=1", 3, 1},
      {"image=3", 3, 2},
      {" image = 4 , video=0 ", 4, 0},
      {"video=5", 16, 5},
      {R"({"image": 5, "video": 1})", 5, 1},
      {R"( {"video": 0})", 16, 0},
      {"image=0,video=0", 0, 0},
  };
  for (const auto& c : ok) {
    SCOPED_TRACE(c.spec);
    auto l = parse_limit_mm_per_prompt(c.spec);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    EXPECT_EQ(l->max_images, c.images);
    EXPECT_EQ(l->max_videos, c.videos);
  }
  // Keys left out keep the base's value.
  auto l = parse_limit_mm_per_prompt("video=7", MediaLimits{3, 1});
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->max_images, 3);
  EXPECT_EQ(l->max_videos, 7);

  const std::pair<const char*, const char*> bad[] = {
      {"audio=1", "unknown modality 'audio'"},
      {"image=-1", "between 0 and"},
      {"image=x", "needs an integer count"},
      {"image=2.5", "needs an integer count"},
      {"image=", "needs an integer count"},
      {"image", "expected modality=count"},
      {"image=1,", "expected modality=count"},
      {"", "empty value"},
      {"{bad", "not a valid JSON object"},
      {R"({"image": "2"})", "'image' must be an integer"},
      {R"({"image": 1.5})", "'image' must be an integer"},
      {R"({"image": 1, "text": 2})", "unknown modality 'text'"},
  };
  for (const auto& [spec, what] : bad) {
    SCOPED_TRACE(spec);
    auto r = parse_limit_mm_per_prompt(spec);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), core::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  }
}

TEST(ProtocolMm, CountsMediaAcrossMessages) {
  const ChatRequest r = parse_ok(conversation("multi_turn"));
  const MediaCounts c = count_media_parts(r.messages);
  EXPECT_EQ(c.images, 2);
  EXPECT_EQ(c.videos, 2);
  const MediaCounts f = count_media_parts(parse_ok(conversation("video_frames_and_image")).messages);
  EXPECT_EQ(f.images, 1);  // the frames of a frame-list video are not images
  EXPECT_EQ(f.videos, 1);
  EXPECT_EQ(count_media_parts(parse_ok(conversation("several_images")).messages).images, 3);
}

TEST(ProtocolMm, LimitsRefuseOverCountRequests) {
  EXPECT_TRUE(check_media_limits({16, 2}, MediaLimits{}).ok());  // defaults: 16 images, 2 videos
  core::Status st = check_media_limits({17, 0}, MediaLimits{});
  EXPECT_EQ(st.code(), core::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("at most 16 images per prompt (got 17)"), std::string::npos) << st.message();
  st = check_media_limits({0, 2}, MediaLimits{4, 1});
  EXPECT_NE(st.message().find("at most 1 video per prompt (got 2)"), std::string::npos) << st.message();
  st = check_media_limits({1, 0}, MediaLimits{0, 0});
  EXPECT_NE(st.message().find("at most 0 images per prompt (got 1)"), std::string::npos) << st.message();
  EXPECT_TRUE(check_media_limits({0, 0}, MediaLimits{0, 0}).ok());
}

}  // namespace
}  // namespace loom::server
