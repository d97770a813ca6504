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
};

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
