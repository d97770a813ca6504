// Runs chat requests end to end against one loaded model folder: chat template -> prompt
// ids -> engine (continuous batching) -> text, logprobs and finish reasons. Used by
// `loom generate` and by the HTTP server.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"
#include "models/config/generation_config.h"
#include "models/config/model_config.h"
#include "ops/ops.h"
#include "server/multimodal_input.h"
#include "server/openai_protocol.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace loom::server {

struct ServiceOptions {
  std::string model_dir;
  std::string served_model_name;  // empty: the folder's name
  std::string device = "cpu";     // cpu (cuda arrives with the CUDA backend)
  models::WeightDType weight_dtype = models::WeightDType::kAuto;
  int threads = 0;                      // 0: all cores
  bool profile = false;                 // time every op (ops::ProfilingOps); see profile_report()
  double gpu_memory_utilization = 0.9;  // --gpu-memory-utilization (cuda)
  engine::EngineConfig engine;
  MultimodalConfig multimodal;  // media loading policy and per-prompt limits
};

// The messages as transformers' ProcessorMixin.apply_chat_template (5.24, _normalize_conversations)
// hands them to the template: OpenAI {"type": "image_url", "image_url": {"url": U} | U} parts become
// {"type": "image", "url": U} (detail dropped). transformers has no rule for "video_url"; it becomes
// the transformers-native {"type": "video", "url": U}, what a transformers user writes for the same
// video. Every other part ({"type": "video", "video": [...]}, text, ...) is passed unchanged.
nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages);

// Whether a template walks message content as a list of parts (Qwen-VL style) or prints it as a
// string (Qwen2.5 text templates): vLLM's "openai" vs "string" content format detection.
bool template_takes_content_parts(const text::ChatTemplate& tpl);

// Renders `req` with `tpl` (template_messages for part-walking templates; text parts joined with
// newlines for string templates, which refuse media parts with Unsupported) and applies
// continue_final_message. Needs no model: ChatService::render_prompt and the tests use it.
core::Expected<std::string> render_chat_prompt(const text::ChatTemplate& tpl, bool takes_parts,
                                               const ChatRequest& req);

class ChatService {
 public:
  static core::Expected<std::unique_ptr<ChatService>> load(const ServiceOptions& options);
  ~ChatService();

  // Applies the model's chat template to the request's messages (media parts included, rendered as
  // transformers renders them; see render_chat_prompt).
  core::Expected<std::string> render_prompt(const ChatRequest& req) const;
  // Runs one request to completion. Media parts are loaded (server/multimodal_input.h) and handed to
  // the model's prepare_multimodal (processor + encoders); text-only models refuse them. on_delta
  // (optional) sees every step's output per choice.
  using DeltaCallback = std::function<void(int choice, const engine::SequenceOutput&)>;
  core::Expected<ChatResult> complete(const ChatRequest& req, const DeltaCallback& on_delta = {});

  const text::Tokenizer& tokenizer() const { return *tokenizer_; }
  const std::string& model_name() const { return model_name_; }
  const engine::SamplingDefaults& sampling_defaults() const { return defaults_; }
  engine::Engine& engine() { return *engine_; }
  // Per-op time table since load (empty unless ServiceOptions::profile).
  std::string profile_report() const;

 private:
  ChatService() = default;

  std::string model_name_;
  models::ModelConfig config_;
  std::unique_ptr<text::Tokenizer> tokenizer_;
  std::unique_ptr<text::ChatTemplate> template_;
  bool template_takes_parts_ = true;  // whether the template iterates over content parts
  MultimodalConfig multimodal_;
  engine::SamplingDefaults defaults_;
  std::unique_ptr<ops::Ops> ops_;
  std::unique_ptr<engine::Engine> engine_;
};

}  // namespace loom::server
