#include "engine/sampling_params.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

namespace loom::engine {
namespace {

using core::Expected;
using core::Status;
using nlohmann::json;

std::string fmt_num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status range_error(std::string_view field, std::string_view rule, double got) {
  return core::invalid_argument(std::string(field) + " must be " + std::string(rule) + ", got " +
                                fmt_num(got));
}

// The value of `key`, or nullptr when it is missing or null (both mean "not set", as in vLLM).
const json* find_field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

Status type_error(std::string_view field, std::string_view expected, const json& got) {
  return core::invalid_argument(std::string(field) + ": expected " + std::string(expected) + ", got " +
                                got.type_name());
}

Expected<double> read_number(std::string_view field, const json& v) {
  if (!v.is_number()) return type_error(field, "a number", v);
  double d = v.get<double>();
  if (!std::isfinite(d)) return core::invalid_argument(std::string(field) + ": must be a finite number");
  return d;
}

// Integers; a float with an integral value (1.0) is accepted as pydantic's lax mode does.
Expected<int64_t> read_int(std::string_view field, const json& v) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return core::invalid_argument(std::string(field) + ": integer out of range");
    }
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.2e18) return static_cast<int64_t>(d);
  }
  return type_error(field, "an integer", v);
}

Expected<int32_t> read_int32(std::string_view field, const json& v) {
  LOOM_ASSIGN_OR_RETURN(int64_t i, read_int(field, v));
  if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max()) {
    return core::invalid_argument(std::string(field) + ": integer out of range, got " + std::to_string(i));
  }
  return static_cast<int32_t>(i);
}

int32_t saturate_int32(int64_t v) {
  return static_cast<int32_t>(
      std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()));
}

Expected<bool> read_bool(std::string_view field, const json& v) {
  if (!v.is_boolean()) return type_error(field, "a boolean", v);
  return v.get<bool>();
}

// A number field with a generation_config default and a hard default.
Expected<double> number_or_default(const json& req, const char* key, std::optional<double> gen_default,
                                   double fallback) {
  if (const json* v = find_field(req, key)) return read_number(key, *v);
  return gen_default.value_or(fallback);
}

Expected<std::vector<std::string>> read_stop(const json& v) {
  std::vector<std::string> out;
  if (v.is_string()) {
    out.push_back(v.get<std::string>());
    return out;
  }
  if (!v.is_array()) return type_error("stop", "a string or an array of strings", v);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) return type_error("stop[" + std::to_string(i) + "]", "a string", v[i]);
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

Expected<std::vector<int32_t>> read_stop_token_ids(const json& v) {
  if (!v.is_array()) return type_error("stop_token_ids", "an array of integers", v);
  std::vector<int32_t> out;
  std::unordered_set<int32_t> seen;
  for (size_t i = 0; i < v.size(); ++i) {
    LOOM_ASSIGN_OR_RETURN(int32_t id, read_int32("stop_token_ids[" + std::to_string(i) + "]", v[i]));
    if (seen.insert(id).second) out.push_back(id);  // vLLM drops duplicates, keeping order
  }
  return out;
}

Expected<std::vector<std::pair<int32_t, float>>> read_logit_bias(const json& v) {
  if (!v.is_object()) return type_error("logit_bias", "an object mapping token ids to numbers", v);
  std::vector<std::pair<int32_t, float>> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& key = it.key();
    const std::string field = "logit_bias[\"" + key + "\"]";
    int64_t id = -1;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    if (ec != std::errc() || end != key.data() + key.size() || key.empty()) {
      return core::invalid_argument(field + ": key must be a token id (an integer), got \"" + key + "\"");
    }
    if (id < 0 || id > std::numeric_limits<int32_t>::max()) {
      return core::invalid_argument(field + ": token id out of range");
    }
    LOOM_ASSIGN_OR_RETURN(double bias, read_number(field, it.value()));
    // OpenAI's range; vLLM clamps rather than rejects.
    bias = std::clamp(bias, -static_cast<double>(kMaxLogitBias), static_cast<double>(kMaxLogitBias));
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  return out;
}

}  // namespace

Status SamplingParams::validate() const {
  if (n < 1) return range_error("n", "at least 1", n);
  if (!std::isfinite(temperature) || temperature < 0.0 || temperature > 2.0) {
    return range_error("temperature", "in [0, 2]", temperature);
  }
  if (temperature < kGreedyTemperature && n > 1) {
    return core::invalid_argument("n must be 1 when using greedy sampling (temperature 0), got " +
                                  std::to_string(n));
  }
  if (!(top_p > 0.0 && top_p <= 1.0)) return range_error("top_p", "in (0, 1]", top_p);
  if (top_k < -1) return range_error("top_k", "0 or -1 (disabled), or at least 1", top_k);
  if (!(min_p >= 0.0 && min_p <= 1.0)) return range_error("min_p", "in [0, 1]", min_p);
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0) {
    return range_error("repetition_penalty", "a finite number greater than 0", repetition_penalty);
  }
  if (!(presence_penalty >= -2.0 && presence_penalty <= 2.0)) {
    return range_error("presence_penalty", "in [-2, 2]", presence_penalty);
  }
  if (!(frequency_penalty >= -2.0 && frequency_penalty <= 2.0)) {
    return range_error("frequency_penalty", "in [-2, 2]", frequency_penalty);
  }
  if (max_tokens != -1 && max_tokens < 1)
    return range_error("max_tokens", "at least 1 (or -1: no limit)", max_tokens);
  if (min_tokens < 0) return range_error("min_tokens", "at least 0", min_tokens);
  if (max_tokens != -1 && min_tokens > max_tokens) {
    return range_error("min_tokens", "at most max_tokens=" + std::to_string(max_tokens), min_tokens);
  }
  if (logprobs < -1 || logprobs > kMaxLogprobs) {
    return range_error("logprobs", "in [0, " + std::to_string(kMaxLogprobs) + "] (or -1: none)", logprobs);
  }
  for (const std::string& s : stop) {
    if (s.empty()) return core::invalid_argument("stop cannot contain an empty string");
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0) return range_error("stop_token_ids", "non-negative token ids", id);
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return range_error("logit_bias", "keyed by non-negative token ids", id);
    if (!std::isfinite(bias)) return core::invalid_argument("logit_bias values must be finite");
  }
  return {};
}

Status SamplingParams::validate_token_ids(int64_t vocab_size) const {
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= vocab_size) {
      return core::invalid_argument("stop_token_ids contains token id " + std::to_string(id) +
                                    " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= vocab_size) {
      return core::invalid_argument("logit_bias contains token id " + std::to_string(id) +
                                    " outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
    }
  }
  return {};
}

Expected<SamplingDefaults> sampling_defaults_from_generation_config(const json& gen_config) {
  if (!gen_config.is_object()) return type_error("generation_config", "an object", gen_config);
  SamplingDefaults d;
  auto number = [&](const char* key, std::optional<double>& out) -> Status {
    if (const json* v = find_field(gen_config, key)) {
      LOOM_ASSIGN_OR_RETURN(out, read_number(std::string("generation_config.") + key, *v));
    }
    return {};
  };
  auto integer = [&](const char* key, std::optional<int64_t>& out) -> Status {
    if (const json* v = find_field(gen_config, key)) {
      LOOM_ASSIGN_OR_RETURN(out, read_int(std::string("generation_config.") + key, *v));
    }
    return {};
  };
  LOOM_RETURN_IF_ERROR(number("temperature", d.temperature));
  LOOM_RETURN_IF_ERROR(number("top_p", d.top_p));
  LOOM_RETURN_IF_ERROR(number("min_p", d.min_p));
  LOOM_RETURN_IF_ERROR(number("repetition_penalty", d.repetition_penalty));
  LOOM_RETURN_IF_ERROR(integer("top_k", d.top_k));
  return d;
}

Expected<SamplingParams> parse_sampling_params(const json& request, const SamplingDefaults& defaults) {
  if (!request.is_object()) return type_error("request", "a JSON object", request);
  SamplingParams p;

  if (const json* v = find_field(request, "n")) {
    LOOM_ASSIGN_OR_RETURN(p.n, read_int32("n", *v));
  }
  LOOM_ASSIGN_OR_RETURN(p.temperature, number_or_default(request, "temperature", defaults.temperature, 1.0));
  LOOM_ASSIGN_OR_RETURN(p.top_p, number_or_default(request, "top_p", defaults.top_p, 1.0));
  LOOM_ASSIGN_OR_RETURN(p.min_p, number_or_default(request, "min_p", defaults.min_p, 0.0));
  LOOM_ASSIGN_OR_RETURN(p.repetition_penalty,
                        number_or_default(request, "repetition_penalty", defaults.repetition_penalty, 1.0));
  LOOM_ASSIGN_OR_RETURN(p.presence_penalty,
                        number_or_default(request, "presence_penalty", std::nullopt, 0.0));
  LOOM_ASSIGN_OR_RETURN(p.frequency_penalty,
                        number_or_default(request, "frequency_penalty", std::nullopt, 0.0));
  {
    int64_t top_k = defaults.top_k.value_or(0);
    if (const json* v = find_field(request, "top_k")) {
      LOOM_ASSIGN_OR_RETURN(top_k, read_int("top_k", *v));
    }
    // Any k beyond the vocabulary means "disabled"; vLLM accepts sys.maxsize.
    p.top_k = saturate_int32(top_k);
  }

  // max_completion_tokens supersedes the deprecated max_tokens. Both are checked when present.
  {
    std::optional<int64_t> max_tokens;
    for (const char* key : {"max_tokens", "max_completion_tokens"}) {
      if (const json* v = find_field(request, key)) {
        LOOM_ASSIGN_OR_RETURN(int64_t m, read_int(key, *v));
        if (m < 1) return range_error(key, "at least 1", static_cast<double>(m));
        max_tokens = m;  // the later key (max_completion_tokens) wins
      }
    }
    // Beyond int32 means "until the context limit" in practice; saturate instead of failing.
    if (max_tokens) p.max_tokens = saturate_int32(*max_tokens);
  }
  if (const json* v = find_field(request, "min_tokens")) {
    LOOM_ASSIGN_OR_RETURN(p.min_tokens, read_int32("min_tokens", *v));
  }

  if (const json* v = find_field(request, "stop")) {
    LOOM_ASSIGN_OR_RETURN(p.stop, read_stop(*v));
  }
  if (const json* v = find_field(request, "stop_token_ids")) {
    LOOM_ASSIGN_OR_RETURN(p.stop_token_ids, read_stop_token_ids(*v));
  }
  if (const json* v = find_field(request, "seed")) {
    LOOM_ASSIGN_OR_RETURN(int64_t seed, read_int("seed", *v));
    if (seed != -1) p.seed = static_cast<uint64_t>(seed);  // vLLM: -1 means no seed
  }
  if (const json* v = find_field(request, "ignore_eos")) {
    LOOM_ASSIGN_OR_RETURN(p.ignore_eos, read_bool("ignore_eos", *v));
  }
  if (const json* v = find_field(request, "include_stop_str_in_output")) {
    LOOM_ASSIGN_OR_RETURN(p.include_stop_str_in_output, read_bool("include_stop_str_in_output", *v));
  }

  {
    bool logprobs = false;
    std::optional<int32_t> top_logprobs;
    if (const json* v = find_field(request, "logprobs")) {
      LOOM_ASSIGN_OR_RETURN(logprobs, read_bool("logprobs", *v));
    }
    if (const json* v = find_field(request, "top_logprobs")) {
      LOOM_ASSIGN_OR_RETURN(top_logprobs, read_int32("top_logprobs", *v));
      if (*top_logprobs < 0 || *top_logprobs > kMaxLogprobs) {
        return range_error("top_logprobs", "in [0, " + std::to_string(kMaxLogprobs) + "]", *top_logprobs);
      }
      if (*top_logprobs > 0 && !logprobs) {
        return core::invalid_argument("top_logprobs requires logprobs to be true");
      }
    }
    if (logprobs) p.logprobs = top_logprobs.value_or(0);
  }
  if (const json* v = find_field(request, "logit_bias")) {
    LOOM_ASSIGN_OR_RETURN(p.logit_bias, read_logit_bias(*v));
  }

  if (p.temperature >= 0.0 && p.temperature < kGreedyTemperature) {
    // Greedy: the filters cannot change an argmax; reset them as vLLM does.
    p.top_p = 1.0;
    p.top_k = 0;
    p.min_p = 0.0;
  }
  LOOM_RETURN_IF_ERROR(p.validate());
  return p;
}

}  // namespace loom::engine
