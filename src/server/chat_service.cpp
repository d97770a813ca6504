#include "server/chat_service.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "models/registry.h"
#include "ops/profiling_ops.h"
#include "server/backend_factory.h"

namespace loom::server {
namespace {

using nlohmann::json;

core::Expected<json> read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return core::not_found("cannot open " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::invalid_argument(path.string() + " is not valid JSON");
  return j;
}

// Whether a template walks message content as a list of parts (Qwen-VL style) or prints it as
// a string (Qwen2.5 text templates). vLLM detects the same thing ("openai" vs "string" content
// format); for string templates, text parts are joined with newlines.
bool template_iterates_content(const std::string& source) {
  static const std::regex kLoop(R"(for\s+\w+\s+in\s+(message|m|msg)(\.content|\[['"]content['"]\]))");
  static const std::regex kIsString(R"((\.content|\[['"]content['"]\])\s+is\s+(not\s+)?string)");
  return std::regex_search(source, kLoop) || std::regex_search(source, kIsString);
}

core::Expected<nlohmann::ordered_json> flatten_text_parts(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (!m.contains("content") || !m["content"].is_array()) continue;
    std::string text;
    bool first = true;
    for (const auto& part : m["content"]) {
      if (part["type"] != "text")
        return core::unsupported("this model's chat template takes text only; got a '" +
                                 part["type"].get<std::string>() + "' content part");
      text += (first ? "" : "\n") + part["text"].get<std::string>();
      first = false;
    }
    m["content"] = text;
  }
  return out;
}

core::Status check_text_only(const nlohmann::ordered_json& messages, const std::string& model_name) {
  for (const auto& m : messages) {
    if (!m.contains("content") || !m["content"].is_array()) continue;
    for (const auto& part : m["content"]) {
      const std::string type = part["type"];
      if (type != "text")
        return core::unsupported("model '" + model_name + "' accepts text only; got a '" + type +
                                 "' content part");
    }
  }
  return {};
}

// eos_token of tokenizer_config.json (a string or {"content": ...}); "" when absent.
std::string tokenizer_config_eos(const std::filesystem::path& dir) {
  auto cfg = read_json_file(dir / "tokenizer_config.json");
  if (!cfg.ok() || !cfg->contains("eos_token")) return "";
  const json& e = (*cfg)["eos_token"];
  if (e.is_string()) return e.get<std::string>();
  if (e.is_object() && e.contains("content") && e["content"].is_string())
    return e["content"].get<std::string>();
  return "";
}

}  // namespace

nlohmann::ordered_json template_messages(const nlohmann::ordered_json& messages) {
  nlohmann::ordered_json out = messages;
  for (auto& m : out) {
    if (!m.is_object() || !m.contains("content") || !m["content"].is_array()) continue;
    for (auto& part : m["content"]) {
      if (!part.is_object() || !part.contains("type")) continue;
      for (const char* kind : {"image", "video"}) {
        const std::string key = std::string(kind) + "_url";
        if (part["type"] != key || !part.contains(key)) continue;
        const auto& v = part[key];
        nlohmann::ordered_json url = v.is_object() ? v.value("url", nlohmann::ordered_json("")) : v;
        part = nlohmann::ordered_json{{"type", kind}, {"url", std::move(url)}};
        break;
      }
    }
  }
  return out;
}

bool template_takes_content_parts(const text::ChatTemplate& tpl) {
  return template_iterates_content(tpl.source());
}

core::Expected<std::string> render_chat_prompt(const text::ChatTemplate& tpl, bool takes_parts,
                                               const ChatRequest& req) {
  nlohmann::ordered_json messages;
  if (takes_parts) {
    messages = template_messages(req.messages);
  } else {
    LOOM_ASSIGN_OR_RETURN(messages, flatten_text_parts(req.messages));
  }
  text::ChatTemplateOptions opts;
  opts.add_generation_prompt = req.add_generation_prompt;
  opts.tools = req.tools;
  opts.extra_context = req.chat_template_kwargs;
  LOOM_ASSIGN_OR_RETURN(std::string prompt, tpl.render(messages, opts));
  if (req.continue_final_message) {
    // Drop what the template appends after the final assistant message (vLLM's behaviour).
    const auto& last = req.messages.back()["content"];
    std::string final_text;
    if (last.is_string()) {
      final_text = last.get<std::string>();
    } else if (last.is_array() && !last.empty() && last.back().contains("text")) {
      final_text = last.back()["text"].get<std::string>();
    }
    const size_t pos = final_text.empty() ? std::string::npos : prompt.rfind(final_text);
    if (pos == std::string::npos)
      return core::invalid_argument(
          "continue_final_message: the final message is not in the rendered prompt");
    prompt.resize(pos + final_text.size());
  }
  return prompt;
}

ChatService::~ChatService() = default;

core::Expected<std::unique_ptr<ChatService>> ChatService::load(const ServiceOptions& options) {
  namespace fs = std::filesystem;
  const fs::path dir(options.model_dir);
  if (!fs::is_directory(dir))
    return core::not_found("model folder '" + options.model_dir + "' does not exist");
  std::unique_ptr<ChatService> s(new ChatService());
  s->model_name_ = options.served_model_name.empty()
                       ? fs::absolute(dir).lexically_normal().filename().string()
                       : options.served_model_name;
  if (s->model_name_.empty()) s->model_name_ = fs::absolute(dir).parent_path().filename().string();

  LOOM_ASSIGN_OR_RETURN(s->config_, models::load_model_config(options.model_dir));
  LOOM_ASSIGN_OR_RETURN(text::Tokenizer tok, text::Tokenizer::from_file((dir / "tokenizer.json").string()));
  s->tokenizer_ = std::make_unique<text::Tokenizer>(std::move(tok));
  LOOM_ASSIGN_OR_RETURN(text::ChatTemplate tpl, text::ChatTemplate::from_model_dir(options.model_dir));
  s->template_takes_parts_ = template_takes_content_parts(tpl);
  s->template_ = std::make_unique<text::ChatTemplate>(std::move(tpl));

  LOOM_ASSIGN_OR_RETURN(models::GenerationConfig gen,
                        models::load_generation_config(options.model_dir, s->config_));
  if (fs::exists(dir / "generation_config.json")) {
    LOOM_ASSIGN_OR_RETURN(json gen_json, read_json_file(dir / "generation_config.json"));
    LOOM_ASSIGN_OR_RETURN(s->defaults_, engine::sampling_defaults_from_generation_config(gen_json));
  }
  engine::EngineConfig ecfg = options.engine;
  ecfg.eos_token_ids = gen.eos_token_ids;
  if (auto eos = tokenizer_config_eos(dir); !eos.empty()) {
    if (auto id = s->tokenizer_->token_to_id(eos);
        id &&
        std::find(ecfg.eos_token_ids.begin(), ecfg.eos_token_ids.end(), *id) == ecfg.eos_token_ids.end())
      ecfg.eos_token_ids.push_back(*id);
  }

  BackendOptions backend;
  backend.device = options.device;
  backend.threads = options.threads;
  backend.gpu_memory_utilization = options.gpu_memory_utilization;
  backend.profile = options.profile;
  LOOM_ASSIGN_OR_RETURN(s->ops_, make_backend(backend));
  models::LoadOptions load;
  load.weight_dtype = options.weight_dtype;
  load.num_threads = options.threads;
  s->multimodal_ = options.multimodal;
  LOOM_ASSIGN_OR_RETURN(auto model, models::load_causal_lm(options.model_dir, s->config_, *s->ops_, load));
  if (model->vocab_size() < s->tokenizer_->vocab_size())
    return core::invalid_argument("tokenizer has " + std::to_string(s->tokenizer_->vocab_size()) +
                                  " ids but the model's vocabulary is " +
                                  std::to_string(model->vocab_size()));
  s->engine_ = std::make_unique<engine::Engine>(std::move(model), *s->tokenizer_, ecfg);
  return s;
}

std::string ChatService::profile_report() const {
  const auto* p = dynamic_cast<const ops::ProfilingOps*>(ops_.get());
  return p != nullptr ? p->report() : std::string();
}

core::Expected<std::string> ChatService::render_prompt(const ChatRequest& req) const {
  return render_chat_prompt(*template_, template_takes_parts_, req);
}

core::Expected<ChatResult> ChatService::complete(const ChatRequest& req, const DeltaCallback& on_delta) {
  models::CausalLM& model = engine_->model();
  if (!model.multimodal()) LOOM_RETURN_IF_ERROR(check_text_only(req.messages, model_name_));
  LOOM_ASSIGN_OR_RETURN(MultimodalInputs inputs, load_multimodal_inputs(req, multimodal_));
  LOOM_ASSIGN_OR_RETURN(std::string prompt, render_prompt(req));
  ChatResult result;
  std::shared_ptr<const models::MultimodalPrompt> mm;
  if (model.multimodal()) {
    std::vector<models::MediaItem> items;
    items.reserve(inputs.items.size());
    for (auto& in : inputs.items) items.push_back(std::move(static_cast<models::MediaItem&>(in)));
    auto prepared = model.prepare_multimodal(prompt, *tokenizer_, items);
    if (!prepared.ok()) return prepared.status();
    result.prompt_token_ids = prepared->token_ids;
    mm = std::make_shared<const models::MultimodalPrompt>(std::move(*prepared));
  } else {
    result.prompt_token_ids = tokenizer_->encode(prompt, /*parse_special=*/true);
  }
  const int n = req.sampling.n;
  std::vector<int64_t> ids;
  for (int i = 0; i < n; ++i) {
    auto id = mm ? engine_->add_multimodal_sequence(mm, req.sampling, static_cast<uint64_t>(i))
                 : engine_->add_sequence(result.prompt_token_ids, req.sampling, static_cast<uint64_t>(i));
    if (!id.ok()) {
      for (int64_t done : ids) engine_->abort_sequence(done);
      return id.status();
    }
    ids.push_back(*id);
  }
  result.choices.resize(static_cast<size_t>(n));
  size_t finished = 0;
  while (finished < static_cast<size_t>(n)) {
    auto outs = engine_->step();
    if (!outs.ok()) {
      for (int64_t id : ids) engine_->abort_sequence(id);
      return outs.status();
    }
    for (const auto& o : *outs) {
      const auto it = std::find(ids.begin(), ids.end(), o.seq_id);
      if (it == ids.end()) continue;
      const auto choice = static_cast<size_t>(it - ids.begin());
      ChoiceResult& c = result.choices[choice];
      c.token_ids.insert(c.token_ids.end(), o.new_tokens.begin(), o.new_tokens.end());
      c.samples.insert(c.samples.end(), o.new_samples.begin(), o.new_samples.end());
      c.text += o.new_text;
      if (on_delta) on_delta(static_cast<int>(choice), o);
      if (o.finished) {
        ++finished;
        c.finish_reason = std::string(engine::finish_reason_name(o.finish_reason));
        if (o.stop_string)
          c.stop_reason = *o.stop_string;
        else if (o.stop_token)
          c.stop_reason = *o.stop_token;
      }
    }
  }
  return result;
}

}  // namespace loom::server
