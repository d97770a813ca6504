// load_multimodal_inputs / models::decode_item_frames: items in conversation order, pixels equal to the
// media layer's Pillow/ffmpeg goldens (exact: decoding is bit-exact there), the local-path policy,
// data URLs, per-prompt limits and error locations.
#include <gtest/gtest.h>

#include <filesystem>

#include "server/multimodal_input.h"
#include "test_util.h"

namespace loom::server {
namespace {

using nlohmann::ordered_json;
using testing::conversation;
using testing::fixture_path;
using testing::load_json_fixture;
using testing::parse_ok;
using testing::read_ppm;
using testing::substitute_paths;

MultimodalConfig fixtures_config() {
  MultimodalConfig c;
  c.policy.allowed_local_media_path = std::string(LOOM_FIXTURES_DIR);
  return c;
}

core::Expected<MultimodalInputs> load(const ordered_json& body,
                                      const MultimodalConfig& cfg = fixtures_config()) {
  return load_multimodal_inputs(parse_ok(substitute_paths(body)), cfg);
}

ordered_json one_user(std::initializer_list<ordered_json> parts) {
  ordered_json msg = ordered_json::object();
  msg["role"] = "user";
  msg["content"] = ordered_json::array();
  for (const auto& p : parts) msg["content"].push_back(p);
  ordered_json body = ordered_json::object();
  body["messages"] = ordered_json::array();
  body["messages"].push_back(msg);
  return body;
}

// The Pillow golden (.ppm) of an image URL of the corpus: data URLs are png_rgb / jpeg_420.
std::string ppm_for(const std::string& url) {
  if (url.rfind("data:image/png", 0) == 0) return fixture_path("media/png_rgb.ppm");
  if (url.rfind("data:image/jpeg", 0) == 0) return fixture_path("media/jpeg_420.ppm");
  return fixture_path("media/" + std::filesystem::path(url).stem().string() + ".ppm");
}

void expect_pixels(const media::Image& img, const std::string& url) {
  const auto ppm = read_ppm(ppm_for(url));
  EXPECT_EQ(img.width, ppm.width) << url;
  EXPECT_EQ(img.height, ppm.height) << url;
  EXPECT_TRUE(img.rgb == ppm.rgb) << "pixels differ from the Pillow golden for " << url;
}

ordered_json video_golden(const std::string& file) {
  const auto g = load_json_fixture("media_video/goldens.json");
  for (const auto& c : g["clips"])
    if (c["file"] == file) return c;
  ADD_FAILURE() << "no video golden " << file;
  return {};
}

// Every corpus conversation: the items come out in conversation order, and per kind in the order
// transformers collects them (goldens' "images" / "videos"); images decode to the Pillow pixels.
TEST(MultimodalInput, CorpusItemsInTransformersOrder) {
  const auto goldens = load_json_fixture("requests_mm/goldens.json");
  const auto corpus = load_json_fixture("requests_mm/conversations.json");
  for (const auto& c : corpus["conversations"]) {
    const std::string id = c["id"];
    SCOPED_TRACE(id);
    ordered_json golden;
    for (const auto& g : goldens["goldens"])
      if (g["conversation"] == id) golden = g;
    ASSERT_FALSE(golden.is_null());
    auto in = load(c["request"]);
    ASSERT_TRUE(in.ok()) << in.status().to_string();
    const ordered_json want_images = substitute_paths(golden["images"]);
    const ordered_json want_videos = substitute_paths(golden["videos"]);
    size_t ni = 0, nv = 0;
    int32_t last_msg = -1, last_part = -1;
    for (const MediaItem& item : in->items) {
      EXPECT_TRUE(item.message_index > last_msg ||
                  (item.message_index == last_msg && item.part_index > last_part))
          << "items out of conversation order at " << item.where;
      last_msg = item.message_index;
      last_part = item.part_index;
      EXPECT_EQ(item.where, "messages[" + std::to_string(item.message_index) + "].content[" +
                                std::to_string(item.part_index) + "]");
      if (item.is_image()) {
        ASSERT_LT(ni, want_images.size());
        // transformers keeps file:// URLs as given; the item keeps the URL as sent too.
        EXPECT_EQ(item.urls, std::vector<std::string>{want_images[ni].get<std::string>()});
        expect_pixels(item.image, item.urls[0]);
        ++ni;
      } else {
        ASSERT_LT(nv, want_videos.size());
        const ordered_json& want = want_videos[nv];
        if (want.is_array()) {
          ASSERT_TRUE(item.is_frame_list());
          ASSERT_EQ(item.urls.size(), want.size());
          ASSERT_EQ(item.frames.size(), want.size());
          for (size_t k = 0; k < want.size(); ++k) {
            EXPECT_EQ(item.urls[k], want[k].get<std::string>());
            expect_pixels(item.frames[k], item.urls[k]);
          }
        } else {
          ASSERT_FALSE(item.is_frame_list());
          EXPECT_EQ(item.urls, std::vector<std::string>{want.get<std::string>()});
          const auto vg = video_golden(std::filesystem::path(item.urls[0]).filename().string());
          EXPECT_EQ(item.video_info.width, vg["width"].get<int32_t>());
          EXPECT_EQ(item.video_info.height, vg["height"].get<int32_t>());
          EXPECT_EQ(item.video_info.num_frames, vg["num_frames"].get<int64_t>());
          ASSERT_TRUE(item.video_bytes);
          EXPECT_EQ(item.video_bytes->size(), std::filesystem::file_size(item.urls[0]));
        }
        ++nv;
      }
    }
    EXPECT_EQ(ni, want_images.size());
    EXPECT_EQ(nv, want_videos.size());
    EXPECT_EQ(in->num_images(), static_cast<int32_t>(want_images.size()));
    EXPECT_EQ(in->num_videos(), static_cast<int32_t>(want_videos.size()));
  }
}

TEST(MultimodalInput, MultiTurnOrderAcrossMessages) {
  auto in = load(conversation("multi_turn"));
  ASSERT_TRUE(in.ok()) << in.status().to_string();
  ASSERT_EQ(in->items.size(), 4u);
  const std::pair<MediaItem::Kind, const char*> want[] = {
      {MediaItem::Kind::kImage, "messages[1].content[0]"},
      {MediaItem::Kind::kImage, "messages[3].content[1]"},
      {MediaItem::Kind::kVideo, "messages[3].content[2]"},
      {MediaItem::Kind::kVideo, "messages[5].content[0]"}};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(in->items[i].kind, want[i].first);
    EXPECT_EQ(in->items[i].where, want[i].second);
  }
}

// Frames decoded on demand equal the ffmpeg CLI goldens of the media layer (exact).
TEST(MultimodalInput, VideoFramesOnDemandMatchFfmpeg) {
  for (const char* file : {"h264_bframes.mp4", "vp9.webm"}) {
    SCOPED_TRACE(file);
    auto in =
        load(one_user({{{"type", "video_url"}, {"video_url", {{"url", std::string("@VIDEO@/") + file}}}}}));
    ASSERT_TRUE(in.ok()) << in.status().to_string();
    const MediaItem& v = in->items.at(0);
    const auto g = video_golden(file);
    const std::vector<int64_t> idx = g["frames"].get<std::vector<int64_t>>();
    auto frames = models::decode_item_frames(v, idx);
    ASSERT_TRUE(frames.ok()) << frames.status().to_string();
    ASSERT_EQ(frames->size(), idx.size());
    const std::string rgb = testing::read_file(
        fixture_path(std::string("media_video/") + std::filesystem::path(file).stem().string() + ".rgb"));
    const size_t frame_bytes = static_cast<size_t>(v.video_info.width) * v.video_info.height * 3;
    ASSERT_EQ(rgb.size(), frame_bytes * idx.size());
    for (size_t k = 0; k < idx.size(); ++k) {
      EXPECT_EQ((*frames)[k].index, idx[k]);
      const auto& px = (*frames)[k].image.rgb;
      ASSERT_EQ(px.size(), frame_bytes);
      EXPECT_TRUE(
          std::equal(px.begin(), px.end(), reinterpret_cast<const uint8_t*>(rgb.data()) + k * frame_bytes))
          << "frame " << idx[k];
    }
    // Sampling is the processor's choice; the item's probe feeds media::qwen_sample_frame_indices.
    auto sampled = media::qwen_sample_frame_indices(v.video_info, media::FrameSampling{});
    ASSERT_TRUE(sampled.ok());
    EXPECT_EQ(*sampled, g["sampling"][0]["indices"].get<std::vector<int64_t>>());
    auto past = models::decode_item_frames(v, std::vector<int64_t>{v.video_info.num_frames});
    EXPECT_EQ(past.status().code(), core::StatusCode::kOutOfRange);
    EXPECT_NE(past.status().message().find("messages[0].content[0]"), std::string::npos);
  }
}

TEST(MultimodalInput, FrameListVideo) {
  auto in = load(conversation("video_frames_and_image"));
  ASSERT_TRUE(in.ok()) << in.status().to_string();
  ASSERT_EQ(in->items.size(), 2u);
  const MediaItem& v = in->items[0];
  ASSERT_TRUE(v.is_frame_list());
  EXPECT_EQ(v.video_info.num_frames, 3);
  EXPECT_EQ(v.video_info.width, 13);
  EXPECT_EQ(v.video_info.height, 7);
  EXPECT_EQ(v.video_info.fps, 0.0);
  auto frames = models::decode_item_frames(v, std::vector<int64_t>{2, 0, 2});
  ASSERT_TRUE(frames.ok()) << frames.status().to_string();
  ASSERT_EQ(frames->size(), 3u);
  EXPECT_EQ((*frames)[0].index, 2);
  EXPECT_TRUE((*frames)[0].image.rgb == v.frames[2].rgb);
  EXPECT_TRUE((*frames)[1].image.rgb == v.frames[0].rgb);
  EXPECT_EQ(models::decode_item_frames(v, std::vector<int64_t>{3}).status().code(),
            core::StatusCode::kOutOfRange);
  EXPECT_EQ(models::decode_item_frames(v, std::vector<int64_t>{-1}).status().code(),
            core::StatusCode::kInvalidArgument);
  EXPECT_EQ(models::decode_item_frames(in->items[1], std::vector<int64_t>{0}).status().code(),
            core::StatusCode::kInvalidArgument);  // an image
}

struct BadLoad {
  ordered_json parts;
  std::string field;  // quoted field the error names
  std::string what;
};

void expect_error(const ordered_json& body, const MultimodalConfig& cfg, core::StatusCode code,
                  const std::string& field, const std::string& what) {
  SCOPED_TRACE(body.dump().substr(0, 200));
  auto in = load(body, cfg);
  ASSERT_FALSE(in.ok());
  EXPECT_EQ(in.status().code(), code) << in.status().to_string();
  EXPECT_NE(in.status().message().find(field), std::string::npos) << in.status().message();
  EXPECT_NE(in.status().message().find(what), std::string::npos) << in.status().message();
}

TEST(MultimodalInput, PathPolicy) {
  const auto image = [](const std::string& url) {
    return one_user(
        {{{"type", "text"}, {"text", "x"}}, {{"type", "image_url"}, {"image_url", {{"url", url}}}}});
  };
  const std::string f = "'messages[0].content[1].image_url.url'";
  const auto bad = core::StatusCode::kInvalidArgument;
  // No allowed directory: every local file is refused, data: URLs still work.
  MultimodalConfig none;
  expect_error(image("@MEDIA@/png_rgb.png"), none, bad, f, "local media paths are disabled");
  expect_error(image("file://@MEDIA@/png_rgb.png"), none, bad, f, "local media paths are disabled");
  auto data_ok = load(conversation("image_url_shorthand"), none);
  ASSERT_TRUE(data_ok.ok()) << data_ok.status().to_string();
  expect_pixels(data_ok->items.at(0).image, data_ok->items.at(0).urls.at(0));
  // Allowed directory tests/fixtures/media: a sibling directory and ".." escapes are refused.
  MultimodalConfig media_only;
  media_only.policy.allowed_local_media_path = fixture_path("media");
  ASSERT_TRUE(load(image("@MEDIA@/png_rgb.png"), media_only).ok());
  expect_error(image("@VIDEO@/vp9.webm"), media_only, bad, f, "outside the allowed directory");
  expect_error(image("@MEDIA@/../media_video/vp9.webm"), media_only, bad, f, "outside the allowed directory");
  expect_error(image("@MEDIA@/no_such.png"), media_only, bad, f, "no_such.png");
  expect_error(image("relative/a.png"), media_only, bad, f, "unsupported media URL");
  // http(s): refused by default; when allowed, this build says it cannot fetch.
  expect_error(image("https://example.com/a.png"), media_only, bad, f, "http(s) media URLs are disabled");
  MultimodalConfig http = media_only;
  http.policy.allow_http = true;
  expect_error(image("http://example.com/a.png"), http, bad, f,
               "not supported in this build (no HTTP client)");
}

TEST(MultimodalInput, DataUrlsAndDecodeErrorsNameThePart) {
  const auto cfg = fixtures_config();
  const auto bad = core::StatusCode::kInvalidArgument;
  expect_error(one_user({{{"type", "image_url"}, {"image_url", "data:image/png;base64,iVBORw0KGgo="}}}), cfg,
               bad, "'messages[0].content[0].image_url'", "png: truncated");
  expect_error(one_user({{{"type", "image_url"}, {"image_url", {{"url", "data:image/png;base64,@@@"}}}}}),
               cfg, bad, "'messages[0].content[0].image_url.url'", "base64");
  expect_error(one_user({{{"type", "image"}, {"image", "data:image/png;base64"}}}), cfg, bad,
               "'messages[0].content[0].image'", "no ','");
  // Not a video (a PNG would open as a one-frame video, as in PyAV), and a video given as a picture.
  expect_error(one_user({{{"type", "video_url"}, {"video_url", {{"url", "@VIDEO@/goldens.json"}}}}}), cfg,
               bad, "'messages[0].content[0].video_url.url'", "not a recognised or readable container");
  expect_error(one_user({{{"type", "image"}, {"url", "@VIDEO@/vp9.webm"}}}), cfg, bad,
               "'messages[0].content[0].url'", "unrecognised format");
  // Frame lists: the failing frame is named; all frames must share one size.
  expect_error(one_user({{{"type", "video"}, {"video", {"@MEDIA@/png_rgb.png", "@MEDIA@/missing.png"}}}}),
               cfg, bad, "'messages[0].content[0].video[1]'", "missing.png");
  expect_error(
      one_user({{{"type", "video"}, {"video", {"@MEDIA@/png_rgb.png", "@MEDIA@/gif_interlaced.gif"}}}}), cfg,
      bad, "'messages[0].content[0].video[1]'", "all frames of a video must have one size");
  // A frame list over the video frame limit is refused before its frames are read.
  MultimodalConfig two_frames = cfg;
  two_frames.video_limits.max_frames_decoded = 2;
  expect_error(conversation("video_frames_and_image"), two_frames, bad, "'messages[0].content[0].video'",
               "3 frames, over the limit of 2");
  // Over the image byte limit.
  MultimodalConfig small = cfg;
  small.policy.limits.max_bytes = 100;
  expect_error(one_user({{{"type", "image_url"}, {"image_url", "@MEDIA@/png_rgb.png"}}}), small, bad,
               "'messages[0].content[0].image_url'", "over the limit");
  // Audio is validated by the protocol but not loaded yet.
  auto audio = load(
      one_user({{{"type", "input_audio"}, {"input_audio", {{"data", "AAAA"}, {"format", "wav"}}}}}), cfg);
  EXPECT_EQ(audio.status().code(), core::StatusCode::kUnsupported);
  EXPECT_NE(audio.status().message().find("messages[0].content[0]"), std::string::npos);
}

TEST(MultimodalInput, PerPromptLimitsBeforeLoading) {
  MultimodalConfig cfg = fixtures_config();
  // Three videos that do not exist: the count is refused before any source is opened.
  ordered_json three = one_user({{{"type", "video_url"}, {"video_url", "/nope/a.mp4"}},
                                 {{"type", "video"}, {"video", {"/nope/b.png"}}},
                                 {{"type", "video"}, {"url", "/nope/c.mp4"}}});
  expect_error(three, cfg, core::StatusCode::kInvalidArgument, "at most 2 videos per prompt (got 3)", "");
  // Counted over all messages of a multi-turn conversation (2 images, 2 videos).
  cfg.per_prompt = {1, 2};
  expect_error(conversation("multi_turn"), cfg, core::StatusCode::kInvalidArgument,
               "at most 1 image per prompt (got 2)", "");
  cfg.per_prompt = {2, 1};
  expect_error(conversation("multi_turn"), cfg, core::StatusCode::kInvalidArgument,
               "at most 1 video per prompt (got 2)", "");
  cfg.per_prompt = {2, 2};
  EXPECT_TRUE(load(conversation("multi_turn"), cfg).ok());
  cfg.per_prompt = {0, 0};
  auto text_only = load(one_user({{{"type", "text"}, {"text", "hi"}}}), cfg);
  ASSERT_TRUE(text_only.ok());
  EXPECT_TRUE(text_only->empty());
}

}  // namespace
}  // namespace loom::server
