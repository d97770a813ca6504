// A model's chat template, rendered exactly as transformers' apply_chat_template(tokenize=False)
// renders it (transformers 5: _normalize_chat_messages drops None-valued message keys, reasoning
// fields are aliased, tools/documents/add_generation_prompt/special tokens/extra kwargs become template
// variables). The Jinja subset interpreter is in text/jinja/.
//
// JSON objects are taken as nlohmann::ordered_json because key order is visible in the output: a tool
// schema printed with `tool | tojson` must keep the caller's key order, as Python dicts do. Passing a
// plain nlohmann::json converts implicitly but sorts keys alphabetically, so requests should be parsed
// into ordered_json.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace loom::text {

struct ChatTemplateOptions {
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;          // null when absent (the template sees None)
  nlohmann::ordered_json documents;      // null when absent
  nlohmann::ordered_json extra_context;  // object of extra kwargs (e.g. {"enable_thinking": false}),
                                         // merged into the render context; null = none
  // Clock of strftime_now(): seconds since the Unix epoch, formatted as UTC. Unset = the machine's
  // local time now, like transformers' datetime.now(). Tests pin it to make dates deterministic.
  std::optional<int64_t> now_epoch_seconds;
};

class ChatTemplate {
 public:
  // Looks in dir for chat_template.jinja (plus additional_chat_templates/<name>.jinja), then
  // chat_template.json ({"chat_template": ...}), then tokenizer_config.json "chat_template" (a string,
  // or a list of {name, template}: render() uses "tool_use" when tools are given and it exists, else
  // "default" — as transformers does). Special tokens (bos_token, eos_token, unk_token, sep_token,
  // pad_token, cls_token, mask_token; a string or {"content": ...}) come from tokenizer_config.json.
  // Every template is parsed here; syntax errors are InvalidArgument with line and column.
  static core::Expected<ChatTemplate> from_model_dir(const std::string& dir);
  // One template; empty bos/eos tokens are left undefined in the template.
  static core::Expected<ChatTemplate> from_source(std::string source, std::string bos_token = "",
                                                  std::string eos_token = "");

  // messages: OpenAI-style array (content string or list of parts, tool_calls, ...). Errors raised by
  // the template (raise_exception('...'), undefined values used, type errors) are InvalidArgument
  // statuses carrying the template's message.
  core::Expected<std::string> render(const nlohmann::ordered_json& messages,
                                     const ChatTemplateOptions& opts) const;

  // Names of the loaded templates ("default" for a single template).
  std::vector<std::string> template_names() const;
  // Source text of a template ("" when absent).
  std::string source(const std::string& name = "default") const;

  struct Impl;

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace loom::text
