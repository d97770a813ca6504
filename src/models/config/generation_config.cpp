#include "models/config/generation_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "models/config/json_fields.h"

namespace loom::models {

using config_detail::FieldReader;
using nlohmann::json;

core::Expected<GenerationConfig> parse_generation_config(const json& gen, const ModelConfig& cfg) {
  if (!gen.is_object()) return core::invalid_argument("generation config is not a JSON object");
  FieldReader r;
  GenerationConfig g;

  auto token = [&](const char* key, int64_t id) -> std::optional<int32_t> {
    if (id < 0 || id > INT32_MAX) {
      r.fail(core::invalid_argument(std::string(key) + ": token id " + std::to_string(id) + " out of range"));
      return std::nullopt;
    }
    return static_cast<int32_t>(id);
  };
  for (int64_t id : r.int_or_list(gen, "", "eos_token_id")) {
    auto v = token("eos_token_id", id);
    if (v && std::find(g.eos_token_ids.begin(), g.eos_token_ids.end(), *v) == g.eos_token_ids.end())
      g.eos_token_ids.push_back(*v);
  }
  for (int32_t v : config_eos_token_ids(cfg)) {
    if (std::find(g.eos_token_ids.begin(), g.eos_token_ids.end(), v) == g.eos_token_ids.end())
      g.eos_token_ids.push_back(v);
  }
  if (auto v = r.opt_int(gen, "", "bos_token_id")) {
    g.bos_token_id = token("bos_token_id", *v);
  } else if (int32_t c = config_bos_token_id(cfg); c >= 0) {
    g.bos_token_id = c;
  }
  if (auto v = r.opt_int(gen, "", "pad_token_id")) {
    g.pad_token_id = token("pad_token_id", *v);
  } else if (int32_t c = config_pad_token_id(cfg); c >= 0) {
    g.pad_token_id = c;
  }

  g.do_sample = r.bool_or(gen, "", "do_sample", false);
  g.temperature = r.opt_number(gen, "", "temperature");
  g.top_p = r.opt_number(gen, "", "top_p");
  g.min_p = r.opt_number(gen, "", "min_p");
  g.repetition_penalty = r.opt_number(gen, "", "repetition_penalty");
  g.top_k = r.opt_int(gen, "", "top_k");
  g.max_new_tokens = r.opt_int(gen, "", "max_new_tokens");
  if (!r.ok()) return r.status();

  auto bad = [](const char* key, const std::string& rule, double v) {
    std::ostringstream os;
    os << key << " must be " << rule << ", got " << v;
    return core::invalid_argument(os.str());
  };
  if (g.temperature && !(*g.temperature >= 0)) return bad("temperature", ">= 0", *g.temperature);
  if (g.top_p && !(*g.top_p > 0 && *g.top_p <= 1)) return bad("top_p", "in (0, 1]", *g.top_p);
  if (g.min_p && !(*g.min_p >= 0 && *g.min_p <= 1)) return bad("min_p", "in [0, 1]", *g.min_p);
  if (g.repetition_penalty && !(*g.repetition_penalty > 0))
    return bad("repetition_penalty", "> 0", *g.repetition_penalty);
  if (g.top_k && *g.top_k < 0) return bad("top_k", ">= 0", static_cast<double>(*g.top_k));
  if (g.max_new_tokens && *g.max_new_tokens < 0)
    return bad("max_new_tokens", ">= 0", static_cast<double>(*g.max_new_tokens));
  return g;
}

core::Expected<GenerationConfig> load_generation_config(const std::string& model_dir,
                                                        const ModelConfig& cfg) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return parse_generation_config(json::object(), cfg);
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::io_error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::invalid_argument(path.string() + ": not valid JSON");
  auto g = parse_generation_config(j, cfg);
  if (!g.ok()) return g.status().with_context(path.string());
  return g;
}

}  // namespace loom::models
