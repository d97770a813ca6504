// OpenAI /v1/chat/completions: the typed, validated request and the response JSON
// (plus vLLM's extensions return_token_ids and return_tokens_as_token_ids). Shared by the
// CLI (`loom generate --request`) and the HTTP server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "engine/sampler.h"
#include "engine/sampling_params.h"
#include "text/tokenizer.h"

namespace loom::server {

struct ChatRequest {
  std::string model;
  // Request JSON keeps the caller's key order (ordered_json): templates print tool schemas
  // with tojson, and Python dicts keep insertion order.
  nlohmann::ordered_json messages;  // array of {role, content (string | parts), ...}, validated
  engine::SamplingParams sampling;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool logprobs = false;
  int32_t top_logprobs = 0;
  bool return_token_ids = false;
  bool return_tokens_as_token_ids = false;
  bool skip_special_tokens = true;
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  nlohmann::ordered_json tools;                 // null when absent
  nlohmann::ordered_json chat_template_kwargs;  // object (may be empty)
  // vLLM's per-request processor overrides (fps, num_frames, max_pixels, min_pixels, ...), kept as sent
  // for the model's processor to interpret; object (may be empty).
  nlohmann::ordered_json mm_processor_kwargs;
};

// Content parts accepted in `messages[i].content` (validated by parse_chat_request):
//   {"type": "text", "text": "..."}
//   {"type": "image_url", "image_url": {"url": "...", "detail"?: "auto"|"low"|"high"}}
//   {"type": "image_url", "image_url": "..."}                      (vLLM's string shorthand)
//   {"type": "video_url", "video_url": {"url": "..."}} / "video_url": "..."
//   {"type": "image", "image"|"url": "..."}                       (transformers' native block)
//   {"type": "video", "video"|"url": "..."}                       (one video file)
//   {"type": "video", "video": ["frame url", ...]}                (Qwen's video as a list of frames)
//   input_audio / audio_url / audio: type-checked only (audio is not loaded yet).
// A URL is data:, file:// or an absolute path (media/media_source.h); http(s) is refused there.

// vLLM's --limit-mm-per-prompt: the most media items of each kind one request may carry. Defaults are
// ours (vLLM allows 999 of each): a guard on the decoding work of one request (the processor's pixel
// budget and max_model_len bound its tokens), enough for multi-image chats; 2 videos because each may
// be sampled to up to 768 frames.
struct MediaLimits {
  int max_images = 16;
  int max_videos = 2;
};

// Parses "image=N,video=M" (either key may be left out; spaces allowed) or the JSON form
// '{"image": N, "video": M}'. Keys left out keep `base`'s value. Counts must be integers >= 0; unknown
// modalities are InvalidArgument (audio is refused until it is supported).
core::Expected<MediaLimits> parse_limit_mm_per_prompt(const std::string& spec, const MediaLimits& base = {});

struct MediaCounts {
  int images = 0;  // image_url and image parts
  int videos = 0;  // video_url and video parts (a list of frames counts as one video)
};
// Counts the media parts of validated messages (every message, in order).
MediaCounts count_media_parts(const nlohmann::ordered_json& messages);
// InvalidArgument "at most N images per prompt (got M)" when a count is over its limit.
core::Status check_media_limits(const MediaCounts& counts, const MediaLimits& limits);

// Validates the body; every problem is an InvalidArgument naming the field.
core::Expected<ChatRequest> parse_chat_request(const nlohmann::ordered_json& body,
                                               const engine::SamplingDefaults& defaults);

// One generated choice, as the engine produced it.
struct ChoiceResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<engine::SampleResult> samples;  // per output token (logprobs), same length as token_ids
  std::string finish_reason;                  // "stop" | "length"
  nlohmann::json stop_reason;                 // matched stop string / token id, or null
};

struct ChatResult {
  std::vector<int32_t> prompt_token_ids;
  std::vector<ChoiceResult> choices;
};

// How a token is written in logprobs: its text (partial UTF-8 bytes become U+FFFD, as
// vLLM does), or "token_id:N" with return_tokens_as_token_ids.
std::string logprob_token_text(const text::Tokenizer& tok, int32_t id, bool as_token_ids);
nlohmann::json logprob_entry(const text::Tokenizer& tok, const engine::SampleResult& s, bool as_token_ids,
                             int32_t top_logprobs);

nlohmann::json format_chat_completion(const ChatRequest& req, const ChatResult& result,
                                      const text::Tokenizer& tok, const std::string& model_name,
                                      const std::string& id, int64_t created);

// Streaming: one chat.completion.chunk carrying `delta` text (and logprobs) for one choice.
nlohmann::json format_chat_chunk(const std::string& id, int64_t created, const std::string& model_name,
                                 int index, const nlohmann::json& delta, const nlohmann::json& logprobs,
                                 const nlohmann::json& finish_reason);

// {"error": {"message", "type", "param", "code"}} as OpenAI and vLLM send it.
nlohmann::json format_error(const core::Status& status);
// HTTP status for a Status (400 for user errors, 404, 413/400 for too long, 500 internal).
int http_status_for(const core::Status& status);

std::string new_completion_id();

}  // namespace loom::server
