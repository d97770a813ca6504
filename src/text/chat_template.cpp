#include "text/chat_template.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/check.h"
#include "text/jinja/error.h"
#include "text/jinja/template.h"

namespace loom::text {

struct ChatTemplate::Impl {
  struct Named {
    std::string name;
    std::string source;
    jinja::Template tmpl;
  };
  std::vector<Named> templates;
  // Named special tokens (bos_token, eos_token, ...) passed to every render, like transformers'
  // tokenizer.special_tokens_map.
  std::vector<std::pair<std::string, std::string>> special_tokens;
};

namespace {

namespace fs = std::filesystem;

core::Expected<std::string> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::io_error("cannot read " + path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

core::Expected<nlohmann::ordered_json> read_json(const fs::path& path) {
  LOOM_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto j = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::corrupt_data(path.string() + " is not valid JSON");
  return j;
}

core::Status add_template(ChatTemplate::Impl* impl, std::string name, std::string source,
                          const std::string& origin) {
  auto parsed = jinja::Template::parse(source);
  if (!parsed.ok()) {
    return parsed.status().with_context("chat template '" + name + "' from " + origin);
  }
  impl->templates.push_back({std::move(name), std::move(source), std::move(parsed).value()});
  return {};
}

// tokenizer_config.json / chat_template.json "chat_template": a string or a list of {name, template}.
core::Status add_from_json_value(ChatTemplate::Impl* impl, const nlohmann::ordered_json& value,
                                 const std::string& origin) {
  if (value.is_string()) return add_template(impl, "default", value.get<std::string>(), origin);
  if (value.is_array()) {
    for (const auto& entry : value) {
      if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
          !entry["name"].is_string() || !entry["template"].is_string()) {
        return core::corrupt_data(origin +
                                  ": chat_template list entries must be {\"name\": str, \"template\": str}");
      }
      LOOM_RETURN_IF_ERROR(
          add_template(impl, entry["name"].get<std::string>(), entry["template"].get<std::string>(), origin));
    }
    return {};
  }
  if (value.is_object()) {
    for (const auto& [name, tmpl] : value.items()) {
      if (!tmpl.is_string()) return core::corrupt_data(origin + ": chat_template values must be strings");
      LOOM_RETURN_IF_ERROR(add_template(impl, name, tmpl.get<std::string>(), origin));
    }
    return {};
  }
  return core::corrupt_data(origin + ": chat_template must be a string or a list of {name, template}");
}

constexpr const char* kSpecialTokenNames[] = {"bos_token", "eos_token", "unk_token", "sep_token",
                                              "pad_token", "cls_token", "mask_token"};

// One message as the template sees it: transformers' _normalize_chat_messages drops None-valued keys,
// then _alias_reasoning_fields exposes the first non-null of reasoning_content / thinking / reasoning
// as both `thinking` (inserted first; a message's own `thinking` keeps its value) and
// `reasoning_content`: {"thinking": r, **message, "reasoning_content": r}.
jinja::Value message_value(const nlohmann::ordered_json& message) {
  const nlohmann::ordered_json* reasoning = nullptr;
  for (const char* key : {"reasoning_content", "thinking", "reasoning"}) {
    auto it = message.find(key);
    if (it != message.end() && !it->is_null()) {
      reasoning = &*it;
      break;
    }
  }
  auto d = std::make_shared<jinja::DictData>();
  if (reasoning != nullptr)
    d->insert_or_assign(jinja::Value::string("thinking"), jinja::Value::from_json(*reasoning));
  for (const auto& [k, v] : message.items()) {
    if (!v.is_null()) d->insert_or_assign(jinja::Value::string(k), jinja::Value::from_json(v));
  }
  if (reasoning != nullptr) {
    d->insert_or_assign(jinja::Value::string("reasoning_content"), jinja::Value::from_json(*reasoning));
  }
  return jinja::Value::dict(std::move(d));
}

}  // namespace

core::Expected<ChatTemplate> ChatTemplate::from_model_dir(const std::string& dir) {
  auto impl = std::make_shared<Impl>();
  const fs::path root(dir);
  if (!fs::is_directory(root)) return core::not_found("model directory not found: " + dir);

  const fs::path jinja_file = root / "chat_template.jinja";
  const fs::path json_file = root / "chat_template.json";
  const fs::path config_file = root / "tokenizer_config.json";
  nlohmann::ordered_json config;
  if (fs::exists(config_file)) {
    LOOM_ASSIGN_OR_RETURN(config, read_json(config_file));
    if (!config.is_object()) return core::corrupt_data(config_file.string() + " must hold a JSON object");
  }

  if (fs::exists(jinja_file)) {
    LOOM_ASSIGN_OR_RETURN(std::string source, read_file(jinja_file));
    LOOM_RETURN_IF_ERROR(add_template(impl.get(), "default", std::move(source), jinja_file.string()));
    const fs::path extra_dir = root / "additional_chat_templates";
    if (fs::is_directory(extra_dir)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(extra_dir)) {
        if (e.is_regular_file() && e.path().extension() == ".jinja") files.push_back(e.path());
      }
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        LOOM_ASSIGN_OR_RETURN(std::string source, read_file(f));
        LOOM_RETURN_IF_ERROR(add_template(impl.get(), f.stem().string(), std::move(source), f.string()));
      }
    }
  } else if (fs::exists(json_file)) {
    LOOM_ASSIGN_OR_RETURN(auto j, read_json(json_file));
    if (!j.is_object() || !j.contains("chat_template")) {
      return core::corrupt_data(json_file.string() + " has no \"chat_template\" key");
    }
    LOOM_RETURN_IF_ERROR(add_from_json_value(impl.get(), j["chat_template"], json_file.string()));
  } else if (config.is_object() && config.contains("chat_template") && !config["chat_template"].is_null()) {
    LOOM_RETURN_IF_ERROR(add_from_json_value(impl.get(), config["chat_template"], config_file.string()));
  }
  if (impl->templates.empty()) {
    return core::not_found("no chat template in " + dir +
                           " (looked for chat_template.jinja, chat_template.json and tokenizer_config.json)");
  }

  if (config.is_object()) {
    for (const char* name : kSpecialTokenNames) {
      auto it = config.find(name);
      if (it == config.end() || it->is_null()) continue;
      if (it->is_string()) {
        impl->special_tokens.emplace_back(name, it->get<std::string>());
      } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
        impl->special_tokens.emplace_back(name, (*it)["content"].get<std::string>());
      } else {
        return core::corrupt_data(config_file.string() + ": " + name +
                                  " must be a string or {\"content\": ...}");
      }
    }
  }
  ChatTemplate t;
  t.impl_ = std::move(impl);
  return t;
}

core::Expected<ChatTemplate> ChatTemplate::from_source(std::string source, std::string bos_token,
                                                       std::string eos_token) {
  auto impl = std::make_shared<Impl>();
  LOOM_RETURN_IF_ERROR(add_template(impl.get(), "default", std::move(source), "source"));
  if (!bos_token.empty()) impl->special_tokens.emplace_back("bos_token", std::move(bos_token));
  if (!eos_token.empty()) impl->special_tokens.emplace_back("eos_token", std::move(eos_token));
  ChatTemplate t;
  t.impl_ = std::move(impl);
  return t;
}

std::vector<std::string> ChatTemplate::template_names() const {
  LOOM_CHECK(impl_ != nullptr) << "ChatTemplate used before from_model_dir/from_source";
  std::vector<std::string> out;
  for (const auto& t : impl_->templates) out.push_back(t.name);
  return out;
}

std::string ChatTemplate::source(const std::string& name) const {
  LOOM_CHECK(impl_ != nullptr) << "ChatTemplate used before from_model_dir/from_source";
  for (const auto& t : impl_->templates) {
    if (t.name == name) return t.source;
  }
  return "";
}

core::Expected<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages,
                                                 const ChatTemplateOptions& opts) const {
  LOOM_CHECK(impl_ != nullptr) << "ChatTemplate used before from_model_dir/from_source";
  // Template choice (tokenizer.get_chat_template).
  const Impl::Named* chosen = nullptr;
  if (impl_->templates.size() == 1 && impl_->templates[0].name == "default") {
    chosen = &impl_->templates[0];
  } else {
    auto find = [&](const char* name) -> const Impl::Named* {
      for (const auto& t : impl_->templates) {
        if (t.name == name) return &t;
      }
      return nullptr;
    };
    if (!opts.tools.is_null()) chosen = find("tool_use");
    if (chosen == nullptr) chosen = find("default");
    if (chosen == nullptr) {
      std::string names;
      for (const auto& t : impl_->templates) names += (names.empty() ? "" : ", ") + t.name;
      return core::invalid_argument("this model has multiple chat templates and none is named 'default': " +
                                    names);
    }
  }

  // Input checks transformers performs before rendering.
  if (!messages.is_array()) return core::invalid_argument("chat messages must be a JSON array");
  if (messages.empty()) {
    return core::invalid_argument(
        "Cannot apply chat template to an empty conversation. Provide at least one message.");
  }
  if (!opts.tools.is_null()) {
    if (!opts.tools.is_array()) return core::invalid_argument("tools must be a list of JSON schemas");
    for (const auto& t : opts.tools) {
      if (!t.is_object()) return core::invalid_argument("each tool must be a JSON schema object");
    }
  }
  if (!opts.documents.is_null()) {
    if (!opts.documents.is_array())
      return core::invalid_argument("Documents should be a list of dicts with 'title' and 'text' keys!");
    for (const auto& d : opts.documents) {
      if (!d.is_object())
        return core::invalid_argument("Documents should be a list of dicts with 'title' and 'text' keys!");
    }
  }
  if (!opts.extra_context.is_null() && !opts.extra_context.is_object()) {
    return core::invalid_argument("extra template kwargs must be a JSON object");
  }

  jinja::RenderVars vars;
  try {
    std::vector<jinja::Value> chat;
    chat.reserve(messages.size());
    for (const auto& m : messages) {
      if (!m.is_object())
        return core::invalid_argument("Chat messages should be dicts, but got " + m.dump().substr(0, 200));
      chat.push_back(message_value(m));
    }

    for (const auto& [name, token] : impl_->special_tokens) vars[name] = jinja::Value::string(token);
    if (opts.extra_context.is_object()) {
      for (const auto& [k, v] : opts.extra_context.items()) {
        if (k == "messages" || k == "tools" || k == "documents" || k == "add_generation_prompt") {
          return core::invalid_argument("extra template kwarg '" + k +
                                        "' collides with a chat template argument");
        }
        vars[k] = jinja::Value::from_json(v);
      }
    }
    vars["messages"] = jinja::Value::list(std::move(chat));
    vars["tools"] = jinja::Value::from_json(opts.tools);
    vars["documents"] = jinja::Value::from_json(opts.documents);
    vars["add_generation_prompt"] = jinja::Value::boolean(opts.add_generation_prompt);
  } catch (const jinja::TemplateError& e) {  // JSON nested beyond jinja::kMaxNesting
    return core::invalid_argument("chat template input: " + e.message());
  }

  jinja::RenderOptions render_opts;
  render_opts.now_epoch_seconds = opts.now_epoch_seconds;
  auto out = chosen->tmpl.render(vars, render_opts);
  if (!out.ok()) return out.status().with_context("chat template");
  return out;
}

}  // namespace loom::text
