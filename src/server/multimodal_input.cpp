#include "server/multimodal_input.h"

#include <utility>

namespace loom::server {
namespace {

using ojson = nlohmann::ordered_json;

// A media failure the request caused becomes InvalidArgument naming the field; IoError / Internal
// (the server could not read a file it was allowed to read) keep their code.
core::Status at_field(const core::Status& st, const std::string& field) {
  const std::string msg = "'" + field + "': " + st.message();
  if (st.code() == core::StatusCode::kIoError || st.code() == core::StatusCode::kInternal)
    return core::Status(st.code(), msg);
  return core::invalid_argument(msg);
}

// The URL of an OpenAI {"<key>": {"url": ...}} / {"<key>": "..."} part and the field naming it.
std::pair<std::string, std::string> openai_url(const ojson& part, const std::string& key,
                                               const std::string& where) {
  const ojson& v = part[key];
  if (v.is_string()) return {v.get<std::string>(), where + "." + key};
  return {v["url"].get<std::string>(), where + "." + key + ".url"};
}

core::Expected<std::vector<uint8_t>> load_bytes(const std::string& url, const std::string& field,
                                                const media::MediaPolicy& policy) {
  auto bytes = media::load_media_bytes(url, policy);
  if (!bytes.ok()) return at_field(bytes.status(), field);
  return std::move(*bytes);
}

core::Expected<media::Image> load_image(const std::string& url, const std::string& field,
                                        const media::MediaPolicy& policy) {
  LOOM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, load_bytes(url, field, policy));
  auto image = media::decode_image(bytes, policy.limits);
  if (!image.ok()) return at_field(image.status(), field);
  return std::move(*image);
}

core::Status load_video_file(MediaItem& item, const std::string& url, const std::string& field,
                             const MultimodalConfig& config) {
  // Videos have their own byte limit (media::VideoLimits), usually larger than an image's.
  media::MediaPolicy policy = config.policy;
  policy.limits.max_bytes = config.video_limits.max_bytes;
  LOOM_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, load_bytes(url, field, policy));
  auto info = media::probe_video(bytes, config.video_limits);
  if (!info.ok()) return at_field(info.status(), field);
  item.video_info = *info;
  item.video_bytes = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  item.urls = {url};
  return {};
}

core::Status load_frame_list(MediaItem& item, const ojson& list, const std::string& field,
                             const MultimodalConfig& config) {
  if (list.empty()) return core::invalid_argument("'" + field + "' must not be an empty list of frames");
  if (static_cast<int64_t>(list.size()) > config.video_limits.max_frames_decoded)
    return core::invalid_argument("'" + field + "': " + std::to_string(list.size()) +
                                  " frames, over the limit of " +
                                  std::to_string(config.video_limits.max_frames_decoded));
  for (size_t k = 0; k < list.size(); ++k) {
    const std::string frame_field = field + "[" + std::to_string(k) + "]";
    const std::string url = list[k].get<std::string>();
    LOOM_ASSIGN_OR_RETURN(media::Image frame, load_image(url, frame_field, config.policy));
    if (!item.frames.empty() &&
        (frame.width != item.frames[0].width || frame.height != item.frames[0].height)) {
      return core::invalid_argument("'" + frame_field + "': frame is " + std::to_string(frame.width) + "x" +
                                    std::to_string(frame.height) + " but the video's first frame is " +
                                    std::to_string(item.frames[0].width) + "x" +
                                    std::to_string(item.frames[0].height) +
                                    " (all frames of a video must have one size)");
    }
    item.urls.push_back(url);
    item.frames.push_back(std::move(frame));
  }
  item.video_info.width = item.frames[0].width;
  item.video_info.height = item.frames[0].height;
  item.video_info.num_frames = static_cast<int64_t>(item.frames.size());
  item.video_info.fps = 0.0;
  item.video_info.duration_s = 0.0;
  return {};
}

}  // namespace

int32_t MultimodalInputs::num_images() const {
  int32_t n = 0;
  for (const auto& it : items) n += it.is_image() ? 1 : 0;
  return n;
}

int32_t MultimodalInputs::num_videos() const {
  int32_t n = 0;
  for (const auto& it : items) n += it.is_video() ? 1 : 0;
  return n;
}

core::Expected<MultimodalInputs> load_multimodal_inputs(const ChatRequest& req,
                                                        const MultimodalConfig& config) {
  // Cheap refusal before any byte is loaded or decoded.
  LOOM_RETURN_IF_ERROR(check_media_limits(count_media_parts(req.messages), config.per_prompt));
  MultimodalInputs out;
  for (size_t i = 0; i < req.messages.size(); ++i) {
    const ojson& m = req.messages[i];
    if (!m.contains("content") || !m["content"].is_array()) continue;
    const ojson& parts = m["content"];
    for (size_t j = 0; j < parts.size(); ++j) {
      const ojson& part = parts[j];
      const std::string type = part["type"];
      if (type == "text") continue;
      MediaItem item;
      item.message_index = static_cast<int32_t>(i);
      item.part_index = static_cast<int32_t>(j);
      item.where = "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "]";
      if (type == "image_url" || type == "image") {
        item.kind = MediaItem::Kind::kImage;
        std::string url, field;
        if (type == "image_url") {
          std::tie(url, field) = openai_url(part, "image_url", item.where);
        } else {
          const bool own = part.contains("image") && !part["image"].is_null();
          field = item.where + (own ? ".image" : ".url");
          url = part[own ? "image" : "url"].get<std::string>();
        }
        LOOM_ASSIGN_OR_RETURN(item.image, load_image(url, field, config.policy));
        item.urls = {url};
      } else if (type == "video_url" || type == "video") {
        item.kind = MediaItem::Kind::kVideo;
        if (type == "video_url") {
          auto [url, field] = openai_url(part, "video_url", item.where);
          LOOM_RETURN_IF_ERROR(load_video_file(item, url, field, config));
        } else {
          const bool own = part.contains("video") && !part["video"].is_null();
          const std::string field = item.where + (own ? ".video" : ".url");
          const ojson& v = part[own ? "video" : "url"];
          if (v.is_array()) {
            LOOM_RETURN_IF_ERROR(load_frame_list(item, v, field, config));
          } else {
            LOOM_RETURN_IF_ERROR(load_video_file(item, v.get<std::string>(), field, config));
          }
        }
      } else {
        return core::unsupported("'" + item.where + "': '" + type +
                                 "' content parts are not supported yet (images and videos only)");
      }
      out.items.push_back(std::move(item));
    }
  }
  return out;
}

}  // namespace loom::server
