// `loom generate`: one chat request against a model folder.
//   --request REQ.json   body of an OpenAI /v1/chat/completions request; prints the
//                        chat.completion JSON (or SSE chunks when "stream": true) on stdout.
//   --prompt "..."       for people: streams the answer to the terminal.
//   --allowed-local-media-path DIR, --limit-mm-per-prompt image=N,video=M: media policy (vLLM's flags),
//                        passed to the chat service, which loads media parts with them.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "server/chat_service.h"
#include "server/multimodal_input.h"
#include "server/openai_protocol.h"

namespace loom::cli {
namespace {

using nlohmann::json;

int g_exit_code = 0;

struct GenerateArgs {
  std::string model;
  std::string request;
  std::string prompt;
  std::string system;
  std::string device = "cpu";
  std::string dtype = "auto";
  std::string served_model_name;
  int threads = 0;
  int64_t max_model_len = 0;
  int max_tokens = 256;
  bool profile = false;
  bool enforce_eager = false;
  double gpu_memory_utilization = 0.9;
  double temperature = -1;
  int64_t seed = -1;
  // --allowed-local-media-path / --limit-mm-per-prompt; the media policy every request is loaded with
  // (server::load_multimodal_inputs).
  server::MultimodalConfig multimodal;
};

core::Expected<nlohmann::ordered_json> read_request(const std::string& path) {
  std::string text;
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    text = ss.str();
  } else {
    std::ifstream in(path);
    if (!in) return core::not_found("cannot open request file '" + path + "'");
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  auto body = nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) return core::invalid_argument("request is not valid JSON");
  return body;
}

int fail(const core::Status& st, bool json_out) {
  if (json_out) std::cout << server::format_error(st).dump(2) << std::endl;
  std::cerr << "loom: " << st.to_string() << std::endl;
  return 1;
}

core::Expected<std::unique_ptr<server::ChatService>> load_service(const GenerateArgs& a) {
  server::ServiceOptions opt;
  opt.model_dir = a.model;
  opt.device = a.device;
  opt.threads = a.threads;
  opt.served_model_name = a.served_model_name;
  opt.engine.max_model_len = a.max_model_len;
  opt.profile = a.profile;
  opt.engine.cuda_graphs = !a.enforce_eager;
  opt.multimodal = a.multimodal;
  opt.gpu_memory_utilization = a.gpu_memory_utilization;
  if (a.dtype == "auto")
    opt.weight_dtype = models::WeightDType::kAuto;
  else if (a.dtype == "f32")
    opt.weight_dtype = models::WeightDType::kF32;
  else if (a.dtype == "bf16")
    opt.weight_dtype = models::WeightDType::kBF16;
  else
    return core::invalid_argument("--dtype must be auto, f32 or bf16");
  return server::ChatService::load(opt);
}

int run_request(const GenerateArgs& a) {
  auto body = read_request(a.request);
  if (!body.ok()) return fail(body.status(), true);
  auto service = load_service(a);
  if (!service.ok()) return fail(service.status(), true);
  server::ChatService& svc = **service;
  auto req = server::parse_chat_request(*body, svc.sampling_defaults());
  if (!req.ok()) return fail(req.status(), true);
  const std::string id = server::new_completion_id();
  const int64_t created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  const std::string name = req->model.empty() ? svc.model_name() : req->model;

  if (!req->stream) {
    auto result = svc.complete(*req);
    if (!result.ok()) return fail(result.status(), true);
    std::cout << server::format_chat_completion(*req, *result, svc.tokenizer(), name, id, created).dump(2)
              << std::endl;
    return 0;
  }
  // Server-sent events, as the HTTP endpoint streams them.
  auto emit = [](const json& j) { std::cout << "data: " << j.dump() << "\n\n" << std::flush; };
  for (int i = 0; i < req->sampling.n; ++i)
    emit(server::format_chat_chunk(id, created, name, i, {{"role", "assistant"}, {"content", ""}}, nullptr,
                                   nullptr));
  auto result = svc.complete(*req, [&](int choice, const engine::SequenceOutput& o) {
    json logprobs = nullptr;
    if (req->logprobs) {
      json content = json::array();
      for (const auto& s : o.new_samples)
        content.push_back(
            server::logprob_entry(svc.tokenizer(), s, req->return_tokens_as_token_ids, req->top_logprobs));
      logprobs = {{"content", content}};
    }
    json delta = {{"content", o.new_text}};
    if (req->return_token_ids) delta["token_ids"] = o.new_tokens;
    json finish = o.finished ? json(std::string(engine::finish_reason_name(o.finish_reason))) : json(nullptr);
    emit(server::format_chat_chunk(id, created, name, choice, delta, logprobs, finish));
  });
  if (!result.ok()) {
    emit(server::format_error(result.status()));
    std::cerr << "loom: " << result.status().to_string() << std::endl;
    return 1;
  }
  if (req->include_usage) {
    int64_t completion = 0;
    for (const auto& c : result->choices) completion += static_cast<int64_t>(c.token_ids.size());
    const auto prompt = static_cast<int64_t>(result->prompt_token_ids.size());
    emit({{"id", id},
          {"object", "chat.completion.chunk"},
          {"created", created},
          {"model", name},
          {"choices", json::array()},
          {"usage",
           {{"prompt_tokens", prompt},
            {"completion_tokens", completion},
            {"total_tokens", prompt + completion}}}});
  }
  std::cout << "data: [DONE]\n\n" << std::flush;
  return 0;
}

int run_prompt(const GenerateArgs& a) {
  auto service = load_service(a);
  if (!service.ok()) return fail(service.status(), false);
  server::ChatService& svc = **service;
  nlohmann::ordered_json body;
  body["messages"] = nlohmann::ordered_json::array();
  if (!a.system.empty()) body["messages"].push_back({{"role", "system"}, {"content", a.system}});
  body["messages"].push_back({{"role", "user"}, {"content", a.prompt}});
  body["max_tokens"] = a.max_tokens;
  if (a.temperature >= 0) body["temperature"] = a.temperature;
  if (a.seed >= 0) body["seed"] = a.seed;
  auto req = server::parse_chat_request(body, svc.sampling_defaults());
  if (!req.ok()) return fail(req.status(), false);
  const auto t0 = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point first;
  int64_t tokens = 0;
  auto result = svc.complete(*req, [&](int, const engine::SequenceOutput& o) {
    if (tokens == 0) first = std::chrono::steady_clock::now();
    tokens += static_cast<int64_t>(o.new_tokens.size());
    std::cout << o.new_text << std::flush;
  });
  std::cout << std::endl;
  if (!result.ok()) return fail(result.status(), false);
  const auto t1 = std::chrono::steady_clock::now();
  const double ttft = std::chrono::duration<double>(first - t0).count();
  const double decode = std::chrono::duration<double>(t1 - first).count();
  std::fprintf(
      stderr, "[%zu prompt tokens, %lld generated, TTFT %.1f ms, %.2f tokens/s decode, finish: %s]\n",
      result->prompt_token_ids.size(), static_cast<long long>(tokens), ttft * 1e3,
      tokens > 1 ? static_cast<double>(tokens - 1) / decode : 0.0, result->choices[0].finish_reason.c_str());
  if (a.profile)
    std::fprintf(stderr, "%s(wall %.1f ms from request to last token)\n", svc.profile_report().c_str(),
                 std::chrono::duration<double>(t1 - t0).count() * 1e3);
  return 0;
}

}  // namespace

int last_exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}

void add_generate_command(CLI::App& app) {
  auto args = std::make_shared<GenerateArgs>();
  CLI::App* cmd = app.add_subcommand("generate", "Run one chat request against a model folder");
  cmd->add_option("--model", args->model, "Hugging Face model folder (config.json, safetensors, tokenizer)")
      ->required()
      ->check(CLI::ExistingDirectory);
  auto* request = cmd->add_option("--request", args->request,
                                  "OpenAI /v1/chat/completions request body (JSON file, or - for stdin); "
                                  "prints the chat.completion JSON");
  auto* prompt = cmd->add_option("--prompt", args->prompt, "A user message; streams the answer as text");
  request->excludes(prompt);
  cmd->add_option("--system", args->system, "System message for --prompt")->needs(prompt);
  cmd->add_option("--max-tokens", args->max_tokens, "Most tokens to generate with --prompt")->needs(prompt);
  cmd->add_option("--temperature", args->temperature,
                  "Sampling temperature for --prompt (default: the model's)")
      ->needs(prompt);
  cmd->add_option("--seed", args->seed, "Sampling seed for --prompt")->needs(prompt);
  cmd->add_option("--device", args->device, "cpu or cuda (when built with the CUDA backend)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Weight storage: auto (as stored), f32 or bf16")
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all cores)")->capture_default_str();
  cmd->add_option("--max-model-len", args->max_model_len, "Context length (0: the model's)");
  cmd->add_option("--gpu-memory-utilization", args->gpu_memory_utilization,
                  "Fraction of GPU memory Loom may use (cuda)")
      ->capture_default_str();
  cmd->add_flag("--enforce-eager", args->enforce_eager,
                "Run decode steps without CUDA graphs (as vLLM's flag)");
  cmd->add_flag("--profile", args->profile, "Print where the time went, per op (with --prompt)");
  cmd->add_option("--served-model-name", args->served_model_name, "Model name in responses");
  cmd->add_option("--allowed-local-media-path", args->multimodal.policy.allowed_local_media_path,
                  "Directory whose files requests may name as media (file:// URLs, absolute paths); "
                  "unset: local files are refused")
      ->check(CLI::ExistingDirectory);
  cmd->add_option_function<std::string>(
      "--limit-mm-per-prompt",
      [args](const std::string& spec) {
        auto limits = server::parse_limit_mm_per_prompt(spec, args->multimodal.per_prompt);
        if (!limits.ok()) throw CLI::ValidationError("--limit-mm-per-prompt", limits.status().message());
        args->multimodal.per_prompt = *limits;
      },
      "Most media items per request: image=N,video=M or '{\"image\": N, \"video\": M}' "
      "(default image=16,video=2)");
  cmd->callback([args, request, prompt]() {
    if (request->count() == 0 && prompt->count() == 0) throw CLI::RequiredError("--request or --prompt");
    set_exit_code(request->count() ? run_request(*args) : run_prompt(*args));
  });
}

}  // namespace loom::cli
