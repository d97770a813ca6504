#include "server/openai_protocol.h"

#include <chrono>
#include <cmath>
#include <random>
#include <set>

namespace loom::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

core::Status field_error(const std::string& field, const std::string& what) {
  return core::invalid_argument("'" + field + "' " + what);
}

// A media URL value: a non-empty string.
core::Status validate_url(const ojson& v, const std::string& where) {
  if (!v.is_string()) return field_error(where, "must be a string");
  if (v.get_ref<const std::string&>().empty()) return field_error(where, "must not be empty");
  return {};
}

// OpenAI's {"<key>": {"url": ..., "detail"?: ...}} or vLLM's string shorthand {"<key>": "..."}.
core::Status validate_url_object(const ojson& part, const std::string& key, const std::string& where) {
  const std::string field = where + "." + key;
  if (!part.contains(key) || part[key].is_null()) return field_error(field, "is required");
  const ojson& v = part[key];
  if (v.is_string()) return validate_url(v, field);
  if (!v.is_object()) return field_error(field, "must be an object {\"url\": ...} or a URL string");
  if (!v.contains("url")) return field_error(field + ".url", "is required");
  LOOM_RETURN_IF_ERROR(validate_url(v["url"], field + ".url"));
  if (key == "image_url" && v.contains("detail") && !v["detail"].is_null()) {
    static const std::set<std::string> kDetail = {"auto", "low", "high"};
    if (!v["detail"].is_string() || !kDetail.count(v["detail"].get<std::string>()))
      return field_error(field + ".detail", "must be one of auto, low, high");
  }
  return {};
}

// Transformers-native media blocks: {"type": "image", "image"|"url": "..."} and
// {"type": "video", "video"|"url": "..." } or {"type": "video", "video": ["frame", ...]} (Qwen's list of
// frames). Exactly one source key.
core::Status validate_native_media(const ojson& part, const std::string& type, const std::string& where) {
  const bool has_own = part.contains(type) && !part[type].is_null();
  const bool has_url = part.contains("url") && !part["url"].is_null();
  if (has_own == has_url)
    return field_error(where, "needs exactly one of '" + type + "' or 'url' (the media source)");
  if (has_url) return validate_url(part["url"], where + ".url");
  const ojson& v = part[type];
  const std::string field = where + "." + type;
  if (type == "video" && v.is_array()) {
    if (v.empty()) return field_error(field, "must not be an empty list of frames");
    for (size_t k = 0; k < v.size(); ++k)
      LOOM_RETURN_IF_ERROR(validate_url(v[k], field + "[" + std::to_string(k) + "]"));
    return {};
  }
  if (type == "video" && !v.is_string())
    return field_error(field, "must be a URL string or a list of frame URLs");
  return validate_url(v, field);
}

core::Status validate_content_part(const ojson& part, const std::string& where) {
  if (!part.is_object()) return field_error(where, "must be an object");
  if (!part.contains("type") || !part["type"].is_string())
    return field_error(where + ".type", "must be a string");
  const std::string type = part["type"];
  static const std::set<std::string> kKnown = {"text",      "image_url", "video_url", "input_audio",
                                               "audio_url", "image",     "video",     "audio"};
  if (!kKnown.count(type))
    return field_error(where + ".type", "has unknown content part type '" + type + "'");
  if (type == "text" && (!part.contains("text") || !part["text"].is_string()))
    return field_error(where + ".text", "must be a string");
  if (type == "image_url" || type == "video_url") return validate_url_object(part, type, where);
  if (type == "image" || type == "video") return validate_native_media(part, type, where);
  return {};
}

core::Status validate_messages(const ojson& messages) {
  if (!messages.is_array()) return field_error("messages", "must be an array");
  if (messages.empty()) return field_error("messages", "must not be empty");
  static const std::set<std::string> kRoles = {"system", "developer", "user", "assistant", "tool"};
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const ojson& m = messages[i];
    if (!m.is_object()) return field_error(where, "must be an object");
    if (!m.contains("role") || !m["role"].is_string())
      return field_error(where + ".role", "must be a string");
    const std::string role = m["role"];
    if (!kRoles.count(role))
      return field_error(where + ".role",
                         "must be one of system, developer, user, assistant, tool (got '" + role + "')");
    if (!m.contains("content") || m["content"].is_null()) {
      if (role == "assistant") continue;  // e.g. a turn holding only tool_calls
      return field_error(where + ".content", "is required");
    }
    const ojson& c = m["content"];
    if (c.is_string()) continue;
    if (!c.is_array())
      return field_error(where + ".content", "must be a string or an array of content parts");
    for (size_t j = 0; j < c.size(); ++j)
      LOOM_RETURN_IF_ERROR(validate_content_part(c[j], where + ".content[" + std::to_string(j) + "]"));
  }
  return {};
}

template <typename T>
core::Status get_optional(const ojson& body, const char* key, T* out) {
  if (!body.contains(key) || body[key].is_null()) return {};
  const ojson& v = body[key];
  if constexpr (std::is_same_v<T, bool>) {
    if (!v.is_boolean()) return field_error(key, "must be a boolean");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) return field_error(key, "must be a string");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) return field_error(key, "must be an integer");
  }
  *out = v.get<T>();
  return {};
}

// Bytes of a UTF-8 string as a JSON array of ints (OpenAI's logprobs "bytes").
// JSON cannot carry -inf; vLLM sends -9999.0 for a token with zero probability.
double json_logprob(float lp) {
  return std::isfinite(lp) ? static_cast<double>(lp) : -9999.0;
}

json bytes_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(static_cast<int>(c));
  return a;
}

// Replaces every invalid or incomplete UTF-8 sequence with U+FFFD.
std::string sanitize_utf8(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

}  // namespace

core::Expected<ChatRequest> parse_chat_request(const ojson& body, const engine::SamplingDefaults& defaults) {
  if (!body.is_object()) return core::invalid_argument("request body must be a JSON object");
  ChatRequest r;
  if (!body.contains("messages")) return field_error("messages", "is required");
  LOOM_RETURN_IF_ERROR(validate_messages(body["messages"]));
  r.messages = body["messages"];
  LOOM_RETURN_IF_ERROR(get_optional(body, "model", &r.model));
  LOOM_RETURN_IF_ERROR(get_optional(body, "stream", &r.stream));
  LOOM_RETURN_IF_ERROR(get_optional(body, "logprobs", &r.logprobs));
  LOOM_RETURN_IF_ERROR(get_optional(body, "top_logprobs", &r.top_logprobs));
  LOOM_RETURN_IF_ERROR(get_optional(body, "return_token_ids", &r.return_token_ids));
  LOOM_RETURN_IF_ERROR(get_optional(body, "return_tokens_as_token_ids", &r.return_tokens_as_token_ids));
  LOOM_RETURN_IF_ERROR(get_optional(body, "skip_special_tokens", &r.skip_special_tokens));
  LOOM_RETURN_IF_ERROR(get_optional(body, "add_generation_prompt", &r.add_generation_prompt));
  LOOM_RETURN_IF_ERROR(get_optional(body, "continue_final_message", &r.continue_final_message));
  if (r.continue_final_message && r.add_generation_prompt && body.contains("add_generation_prompt") &&
      body["add_generation_prompt"].get<bool>())
    return core::invalid_argument("'continue_final_message' and 'add_generation_prompt' cannot both be true");
  if (r.continue_final_message) {
    r.add_generation_prompt = false;
    if (r.messages.back()["role"] != "assistant")
      return field_error("continue_final_message", "needs the last message to be from the assistant");
  }
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    const ojson& so = body["stream_options"];
    if (!so.is_object()) return field_error("stream_options", "must be an object");
    if (!r.stream) return field_error("stream_options", "is only allowed when 'stream' is true");
    LOOM_RETURN_IF_ERROR(get_optional(so, "include_usage", &r.include_usage).with_context("stream_options"));
  }
  if (r.top_logprobs < 0 || r.top_logprobs > 20)
    return field_error("top_logprobs", "must be between 0 and 20");
  if (body.contains("top_logprobs") && !body["top_logprobs"].is_null() && !r.logprobs)
    return field_error("top_logprobs", "requires 'logprobs' to be true");
  if (body.contains("tools") && !body["tools"].is_null()) {
    if (!body["tools"].is_array()) return field_error("tools", "must be an array");
    r.tools = body["tools"];
  }
  r.chat_template_kwargs = ojson::object();
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      return field_error("chat_template_kwargs", "must be an object");
    r.chat_template_kwargs = body["chat_template_kwargs"];
  }
  r.mm_processor_kwargs = ojson::object();
  if (body.contains("mm_processor_kwargs") && !body["mm_processor_kwargs"].is_null()) {
    if (!body["mm_processor_kwargs"].is_object())
      return field_error("mm_processor_kwargs", "must be an object");
    r.mm_processor_kwargs = body["mm_processor_kwargs"];
  }
  LOOM_ASSIGN_OR_RETURN(r.sampling, engine::parse_sampling_params(json(body), defaults));
  r.sampling.logprobs = r.logprobs ? r.top_logprobs : -1;
  return r;
}

core::Expected<MediaLimits> parse_limit_mm_per_prompt(const std::string& spec, const MediaLimits& base) {
  MediaLimits out = base;
  auto set = [&](const std::string& key, int64_t n) -> core::Status {
    if (n < 0 || n > 1000000)
      return core::invalid_argument("--limit-mm-per-prompt: '" + key + "' must be between 0 and 1000000");
    if (key == "image") {
      out.max_images = static_cast<int>(n);
    } else if (key == "video") {
      out.max_videos = static_cast<int>(n);
    } else {
      return core::invalid_argument("--limit-mm-per-prompt: unknown modality '" + key +
                                    "' (supported: image, video)");
    }
    return {};
  };
  size_t first = spec.find_first_not_of(" \t");
  if (first == std::string::npos) return core::invalid_argument("--limit-mm-per-prompt: empty value");
  if (spec[first] == '{') {
    const json j = json::parse(spec, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return core::invalid_argument("--limit-mm-per-prompt: not a valid JSON object: " + spec);
    for (const auto& [key, v] : j.items()) {
      if (!v.is_number_integer())
        return core::invalid_argument("--limit-mm-per-prompt: '" + key + "' must be an integer");
      LOOM_RETURN_IF_ERROR(set(key, v.get<int64_t>()));
    }
    return out;
  }
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(pos, comma - pos);
    const size_t a = item.find_first_not_of(" \t"), b = item.find_last_not_of(" \t");
    item = a == std::string::npos ? "" : item.substr(a, b - a + 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return core::invalid_argument("--limit-mm-per-prompt: expected modality=count, got '" + item + "'");
    std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    while (!key.empty() && (key.back() == ' ' || key.back() == '\t')) key.pop_back();
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(value.begin());
    size_t used = 0;
    int64_t n = -1;
    try {
      n = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (value.empty() || used != value.size())
      return core::invalid_argument("--limit-mm-per-prompt: '" + key + "' needs an integer count, got '" +
                                    value + "'");
    LOOM_RETURN_IF_ERROR(set(key, n));
    pos = comma + 1;
  }
  return out;
}

MediaCounts count_media_parts(const ojson& messages) {
  MediaCounts c;
  if (!messages.is_array()) return c;
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    for (const auto& part : m["content"]) {
      if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) continue;
      const std::string& type = part["type"].get_ref<const std::string&>();
      if (type == "image_url" || type == "image") ++c.images;
      if (type == "video_url" || type == "video") ++c.videos;
    }
  }
  return c;
}

core::Status check_media_limits(const MediaCounts& counts, const MediaLimits& limits) {
  auto over = [](int limit, int got, const char* one, const char* many) {
    return core::invalid_argument("at most " + std::to_string(limit) + " " + (limit == 1 ? one : many) +
                                  " per prompt (got " + std::to_string(got) +
                                  "); the server's --limit-mm-per-prompt sets this");
  };
  if (counts.images > limits.max_images) return over(limits.max_images, counts.images, "image", "images");
  if (counts.videos > limits.max_videos) return over(limits.max_videos, counts.videos, "video", "videos");
  return {};
}

std::string logprob_token_text(const text::Tokenizer& tok, int32_t id, bool as_token_ids) {
  if (as_token_ids) return "token_id:" + std::to_string(id);
  return sanitize_utf8(tok.token_bytes(id));
}

json logprob_entry(const text::Tokenizer& tok, const engine::SampleResult& s, bool as_token_ids,
                   int32_t top_logprobs) {
  json e;
  e["token"] = logprob_token_text(tok, s.token, as_token_ids);
  e["logprob"] = json_logprob(s.logprob);
  e["bytes"] = bytes_array(tok.token_bytes(s.token));
  json top = json::array();
  for (size_t i = 0; i < s.top.size() && static_cast<int32_t>(i) < top_logprobs; ++i) {
    top.push_back({{"token", logprob_token_text(tok, s.top[i].token, as_token_ids)},
                   {"logprob", json_logprob(s.top[i].logprob)},
                   {"bytes", bytes_array(tok.token_bytes(s.top[i].token))}});
  }
  e["top_logprobs"] = std::move(top);
  return e;
}

json format_chat_completion(const ChatRequest& req, const ChatResult& result, const text::Tokenizer& tok,
                            const std::string& model_name, const std::string& id, int64_t created) {
  json choices = json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < result.choices.size(); ++i) {
    const ChoiceResult& c = result.choices[i];
    completion_tokens += static_cast<int64_t>(c.token_ids.size());
    json choice;
    choice["index"] = i;
    choice["message"] = {{"role", "assistant"}, {"content", c.text}};
    if (req.logprobs) {
      json content = json::array();
      for (const auto& s : c.samples)
        content.push_back(logprob_entry(tok, s, req.return_tokens_as_token_ids, req.top_logprobs));
      choice["logprobs"] = {{"content", std::move(content)}};
    } else {
      choice["logprobs"] = nullptr;
    }
    choice["finish_reason"] = c.finish_reason;
    choice["stop_reason"] = c.stop_reason;
    if (req.return_token_ids) choice["token_ids"] = c.token_ids;
    choices.push_back(std::move(choice));
  }
  json out;
  out["id"] = id;
  out["object"] = "chat.completion";
  out["created"] = created;
  out["model"] = model_name;
  out["choices"] = std::move(choices);
  const auto prompt_tokens = static_cast<int64_t>(result.prompt_token_ids.size());
  out["usage"] = {{"prompt_tokens", prompt_tokens},
                  {"completion_tokens", completion_tokens},
                  {"total_tokens", prompt_tokens + completion_tokens}};
  if (req.return_token_ids) out["prompt_token_ids"] = result.prompt_token_ids;
  return out;
}

json format_chat_chunk(const std::string& id, int64_t created, const std::string& model_name, int index,
                       const json& delta, const json& logprobs, const json& finish_reason) {
  json choice = {
      {"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish_reason}};
  return {{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", model_name},
          {"choices", json::array({choice})}};
}

json format_error(const core::Status& status) {
  const int code = http_status_for(status);
  std::string type = code >= 500 ? "InternalServerError" : code == 404 ? "NotFoundError" : "BadRequestError";
  return {{"error", {{"message", status.message()}, {"type", type}, {"param", nullptr}, {"code", code}}}};
}

int http_status_for(const core::Status& status) {
  switch (status.code()) {
    case core::StatusCode::kOk: return 200;
    case core::StatusCode::kInvalidArgument:
    case core::StatusCode::kUnsupported:
    case core::StatusCode::kCorruptData:
    case core::StatusCode::kOutOfRange: return 400;
    case core::StatusCode::kNotFound: return 404;
    case core::StatusCode::kResourceExhausted: return 503;
    case core::StatusCode::kIoError:
    case core::StatusCode::kInternal: return 500;
  }
  return 500;
}

std::string new_completion_id() {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  static const char* kHex = "0123456789abcdef";
  std::string id = "chatcmpl-";
  for (int i = 0; i < 32; ++i) id += kHex[rng() & 15];
  return id;
}

}  // namespace loom::server
