#include "models/config/model_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "models/config/json_fields.h"

namespace loom::models {
namespace {

using config_detail::FieldReader;
using nlohmann::json;

// Defaults of the transformers configuration class of each decoder (transformers 5.x
// Qwen2Config, Qwen3Config, Qwen2_5_VLTextConfig, Qwen3VLTextConfig, Qwen2_5OmniTextConfig).
struct TextFamily {
  std::string_view model_type;
  bool qwen3;              // q/k RMSNorm, attention_bias from the config, head_dim default 128
  double rms_norm_eps;     // default
  double rope_theta;       // default_theta
  bool has_sliding;        // the class knows use_sliding_window / sliding_window / max_window_layers
  int64_t sliding_window;  // default
  int64_t max_window_layers;
};

constexpr TextFamily kFamilies[] = {
    {"qwen2", false, 1e-6, 10000.0, true, 4096, 28},
    {"qwen3", true, 1e-6, 10000.0, true, 4096, 28},
    {"qwen2_5_vl_text", false, 1e-5, 1000000.0, true, 4096, 80},
    {"qwen3_vl_text", true, 1e-6, 500000.0, false, 0, 0},
    {"qwen2_5_omni_text", false, 1e-6, 1000000.0, true, 32768, 28},
};

const TextFamily* find_family(std::string_view text_type) {
  for (const auto& f : kFamilies) {
    if (f.model_type == text_type) return &f;
  }
  return nullptr;
}

// Where the pieces of one config.json live.
struct Layout {
  const json* text = nullptr;   // the decoder's fields
  std::string text_path;        // "" (top level), "text_config", "thinker_config.text_config"
  const json* owner = nullptr;  // holds the special token ids and the model's tie flag
  std::string owner_path;
  std::string text_type;     // resolved decoder model_type
  bool vl_text_tie = false;  // Qwen2.5-VL: a text_config tie flag also ties (transformers merges it)
  const json* vision = nullptr;
  const json* audio = nullptr;
};

constexpr std::string_view kSupported =
    "qwen2, qwen3, qwen2_5_vl, qwen3_vl, qwen2_5_omni, qwen2_5_omni_thinker";

// Resolves the nested text config and checks its model_type. `expected` is the only decoder type
// this top-level type carries.
void nested_text(FieldReader& r, const json& parent, const std::string& parent_path,
                 std::string_view expected, bool required, Layout* out) {
  out->text_path = FieldReader::join(parent_path, "text_config");
  const json* t = r.object(parent, parent_path, "text_config");
  if (t == nullptr) {
    if (required && r.ok()) r.fail(core::invalid_argument(out->text_path + " is missing"));
    return;
  }
  out->text = t;
  auto type = r.opt_string(*t, out->text_path, "model_type");
  if (type && *type != expected) {
    r.fail(core::unsupported(out->text_path + ".model_type '" + *type +
                             "' is not supported here (expected '" + std::string(expected) + "')"));
  }
  out->text_type = std::string(expected);
}

core::Expected<Layout> locate(const json& j) {
  FieldReader r;
  Layout l;
  if (!j.is_object()) return core::invalid_argument("config.json is not a JSON object");
  auto model_type = r.opt_string(j, "", "model_type");
  if (!r.ok()) return r.status();
  if (!model_type) return core::invalid_argument("model_type is missing");
  const std::string& mt = *model_type;
  l.owner = &j;
  if (mt == "qwen2" || mt == "qwen3") {
    l.text = &j;
    l.text_type = mt;
  } else if (mt == "qwen2_5_vl") {
    nested_text(r, j, "", "qwen2_5_vl_text", /*required=*/false, &l);
    if (l.text == nullptr && r.ok()) {  // checkpoints saved before transformers 4.53: fields at the top
      l.text = &j;
      l.text_path.clear();
      l.text_type = "qwen2_5_vl_text";
    }
    l.vl_text_tie = l.text != &j;
    l.vision = r.object(j, "", "vision_config");
  } else if (mt == "qwen3_vl") {
    nested_text(r, j, "", "qwen3_vl_text", /*required=*/true, &l);
    l.vision = r.object(j, "", "vision_config");
  } else if (mt == "qwen2_5_omni") {
    const json* thinker = r.object(j, "", "thinker_config");
    if (thinker == nullptr) {
      if (r.ok()) r.fail(core::invalid_argument("thinker_config is missing"));
    } else {
      l.owner = thinker;
      l.owner_path = "thinker_config";
      nested_text(r, *thinker, "thinker_config", "qwen2_5_omni_text", /*required=*/true, &l);
      l.vision = r.object(*thinker, "thinker_config", "vision_config");
      l.audio = r.object(*thinker, "thinker_config", "audio_config");
    }
  } else if (mt == "qwen2_5_omni_thinker") {
    nested_text(r, j, "", "qwen2_5_omni_text", /*required=*/true, &l);
    l.vision = r.object(j, "", "vision_config");
    l.audio = r.object(j, "", "audio_config");
  } else {
    return core::unsupported("model_type '" + mt +
                             "' is not supported (supported: " + std::string(kSupported) + ")");
  }
  if (!r.ok()) return r.status();
  return l;
}

// "rope_scaling" (transformers 4.x, with rope_theta beside it) or "rope_parameters" (5.x).
void parse_rope(FieldReader& r, const json& t, const std::string& tp, const TextFamily& fam, int64_t head_dim,
                int64_t max_pos, RopeConfig* rope) {
  // transformers: rope_scaling, when present, wins over rope_parameters.
  std::string pp = FieldReader::join(tp, "rope_scaling");
  const json* p = r.object(t, tp, "rope_scaling");
  if (p == nullptr) {
    pp = FieldReader::join(tp, "rope_parameters");
    p = r.object(t, tp, "rope_parameters");
  }
  static const json kEmpty = json::object();
  if (p != nullptr && p->contains("full_attention")) {  // nested per layer type: Qwen layers are all full
    const std::string parent = pp;
    pp = FieldReader::join(parent, "full_attention");
    p = r.object(*p, parent, "full_attention");
  }
  const json& P = p != nullptr ? *p : kEmpty;

  rope->theta = r.opt_number(P, pp, "rope_theta").value_or(r.number_or(t, tp, "rope_theta", fam.rope_theta));
  if (r.ok() && !(rope->theta > 0))
    r.fail(core::invalid_argument(FieldReader::join(pp, "rope_theta") + " must be positive"));

  auto type = r.opt_string(P, pp, "rope_type");
  if (!type) type = r.opt_string(P, pp, "type");
  rope->type = type.value_or("default");
  if (rope->type == "mrope") rope->type = "default";  // Qwen2-VL era spelling; M-RoPE is mrope_section
  static constexpr std::string_view kTypes[] = {"default", "linear", "dynamic", "yarn", "llama3"};
  if (std::find(std::begin(kTypes), std::end(kTypes), rope->type) == std::end(kTypes)) {
    r.fail(core::unsupported(pp + ": rope type '" + rope->type +
                             "' is not supported (supported: default, linear, dynamic, yarn, llama3)"));
    return;
  }
  auto factor = r.opt_number(P, pp, "factor");
  if (rope->type != "default" && !factor && r.ok())
    r.fail(core::invalid_argument(FieldReader::join(pp, "factor") + " is missing (required for rope type " +
                                  rope->type + ")"));
  rope->factor = factor.value_or(1.0);
  if (r.ok() && !(rope->factor > 0))
    r.fail(core::invalid_argument(FieldReader::join(pp, "factor") + " must be positive"));

  rope->beta_fast = r.number_or(P, pp, "beta_fast", 32.0);
  rope->beta_slow = r.number_or(P, pp, "beta_slow", 1.0);
  rope->attention_factor = r.number_or(P, pp, "attention_factor", 0.0);
  rope->mscale = r.number_or(P, pp, "mscale", 0.0);
  rope->mscale_all_dim = r.number_or(P, pp, "mscale_all_dim", 0.0);
  auto low = r.opt_number(P, pp, "low_freq_factor");
  auto high = r.opt_number(P, pp, "high_freq_factor");
  if (rope->type == "llama3" && r.ok() && (!low || !high))
    r.fail(core::invalid_argument(pp + ": llama3 rope needs low_freq_factor and high_freq_factor"));
  rope->low_freq_factor = low.value_or(1.0);
  rope->high_freq_factor = high.value_or(4.0);
  auto orig = r.opt_int(P, pp, "original_max_position_embeddings");
  if (rope->type == "yarn" || rope->type == "llama3") {
    rope->original_max_position_embeddings = orig.value_or(max_pos);  // transformers' standardisation
  } else {
    rope->original_max_position_embeddings = orig.value_or(0);
  }

  rope->mrope_section.clear();
  if (const json* ms = FieldReader::find(P, "mrope_section")) {
    bool good = ms->is_array() && !ms->empty();
    for (const json& v : good ? *ms : kEmpty) {
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 || v.get<int64_t>() > 1 << 20) {
        good = false;
        break;
      }
      rope->mrope_section.push_back(v.get<int>());
    }
    if (!good)
      r.fail(core::invalid_argument(FieldReader::join(pp, "mrope_section") +
                                    ": expected a list of positive integers, got " + ms->dump()));
  }
  rope->mrope_interleaved = r.bool_or(P, pp, "mrope_interleaved", false);
  rope->partial_rotary_factor =
      r.opt_number(P, pp, "partial_rotary_factor").value_or(r.number_or(t, tp, "partial_rotary_factor", 1.0));
  if (!r.ok()) return;
  if (!(rope->partial_rotary_factor > 0 && rope->partial_rotary_factor <= 1))
    r.fail(core::invalid_argument(pp + ": partial_rotary_factor must be in (0, 1]"));
  const auto rotary_dim = static_cast<int64_t>(static_cast<double>(head_dim) * rope->partial_rotary_factor);
  if (!rope->mrope_section.empty()) {
    int64_t sum = 0;
    for (int s : rope->mrope_section) sum += s;
    if (2 * sum != rotary_dim)
      r.fail(core::invalid_argument(FieldReader::join(pp, "mrope_section") + " sums to " +
                                    std::to_string(sum) + " rotary pairs but the rotary dimension " +
                                    std::to_string(rotary_dim) + " has " + std::to_string(rotary_dim / 2)));
  }
}

void parse_text(FieldReader& r, const Layout& l, const json& top, TextConfig* t) {
  const json& J = *l.text;
  const std::string& p = l.text_path;
  const TextFamily& fam = *find_family(l.text_type);
  t->model_type = l.text_type;

  t->vocab_size = r.required_int(J, p, "vocab_size");
  t->hidden_size = r.required_int(J, p, "hidden_size");
  t->intermediate_size = r.required_int(J, p, "intermediate_size");
  t->num_hidden_layers = r.required_int(J, p, "num_hidden_layers");
  t->num_attention_heads = r.required_int(J, p, "num_attention_heads");
  t->max_position_embeddings = r.required_int(J, p, "max_position_embeddings");
  if (!r.ok()) return;
  const std::pair<const char*, int64_t> positive[] = {
      {"vocab_size", t->vocab_size},
      {"hidden_size", t->hidden_size},
      {"intermediate_size", t->intermediate_size},
      {"num_hidden_layers", t->num_hidden_layers},
      {"num_attention_heads", t->num_attention_heads},
      {"max_position_embeddings", t->max_position_embeddings}};
  for (const auto& [key, v] : positive) {
    if (v <= 0) {
      r.fail(
          core::invalid_argument(FieldReader::join(p, key) + " must be positive, got " + std::to_string(v)));
      return;
    }
  }
  t->num_key_value_heads = r.int_or(J, p, "num_key_value_heads", t->num_attention_heads);
  if (r.ok() && (t->num_key_value_heads <= 0 || t->num_attention_heads % t->num_key_value_heads != 0))
    r.fail(core::invalid_argument(
        FieldReader::join(p, "num_key_value_heads") + " (" + std::to_string(t->num_key_value_heads) +
        ") must divide num_attention_heads (" + std::to_string(t->num_attention_heads) + ")"));
  if (auto hd = r.opt_int(J, p, "head_dim")) {
    t->head_dim = *hd;
  } else if (fam.qwen3) {
    t->head_dim = 128;  // Qwen3Config / Qwen3VLTextConfig default
  } else {
    if (r.ok() && t->hidden_size % t->num_attention_heads != 0)
      r.fail(core::invalid_argument(FieldReader::join(p, "hidden_size") + " (" +
                                    std::to_string(t->hidden_size) +
                                    ") is not divisible by num_attention_heads (" +
                                    std::to_string(t->num_attention_heads) + ") and head_dim is absent"));
    t->head_dim = t->hidden_size / t->num_attention_heads;
  }
  if (r.ok() && t->head_dim <= 0)
    r.fail(core::invalid_argument(FieldReader::join(p, "head_dim") + " must be positive"));
  t->rms_norm_eps = r.number_or(J, p, "rms_norm_eps", fam.rms_norm_eps);
  if (r.ok() && !(t->rms_norm_eps > 0))
    r.fail(core::invalid_argument(FieldReader::join(p, "rms_norm_eps") + " must be positive"));
  t->hidden_act = r.opt_string(J, p, "hidden_act").value_or("silu");
  if (!r.ok()) return;

  parse_rope(r, J, p, fam, t->head_dim, t->max_position_embeddings, &t->rope);

  // The model's own config decides tying (PreTrainedModel.tie_weights reads self.config); for
  // Qwen2.5-VL the config class also folds text_config's flag into it.
  t->tie_word_embeddings = r.bool_or(*l.owner, l.owner_path, "tie_word_embeddings", false);
  if (l.vl_text_tie)
    t->tie_word_embeddings = t->tie_word_embeddings || r.bool_or(J, p, "tie_word_embeddings", false);

  t->qk_norm = fam.qwen3;
  // Qwen2Attention hard-codes bias=True on q/k/v whatever the config says.
  t->attention_bias = fam.qwen3 ? r.bool_or(J, p, "attention_bias", false) : true;

  if (fam.has_sliding) {
    t->use_sliding_window = r.bool_or(J, p, "use_sliding_window", false);
    // Absent -> class default; explicit null -> no window.
    int64_t window =
        FieldReader::present(J, "sliding_window") ? r.int_or(J, p, "sliding_window", 0) : fam.sliding_window;
    t->sliding_window = t->use_sliding_window ? window : 0;
    t->max_window_layers = FieldReader::present(J, "max_window_layers")
                               ? r.int_or(J, p, "max_window_layers", 0)
                               : fam.max_window_layers;
    if (r.ok() && (t->sliding_window < 0 || t->max_window_layers < 0))
      r.fail(core::invalid_argument(p.empty()
                                        ? "sliding_window/max_window_layers must be non-negative"
                                        : p + ": sliding_window/max_window_layers must be non-negative"));
  }

  t->layer_types.clear();
  if (const json* lt = FieldReader::find(J, "layer_types")) {
    const std::string lp = FieldReader::join(p, "layer_types");
    if (!lt->is_array() || static_cast<int64_t>(lt->size()) != t->num_hidden_layers) {
      r.fail(core::invalid_argument(lp + ": expected a list of " + std::to_string(t->num_hidden_layers) +
                                    " layer types, got " + lt->dump()));
      return;
    }
    for (const json& v : *lt) {
      if (!v.is_string() || (v != "full_attention" && v != "sliding_attention")) {
        r.fail(core::unsupported(lp + ": layer type " + v.dump() +
                                 " is not supported (full_attention, sliding_attention)"));
        return;
      }
      t->layer_types.push_back(v.get<std::string>());
    }
  } else {
    for (int64_t i = 0; i < t->num_hidden_layers; ++i) {
      bool sliding = t->sliding_window > 0 && i >= t->max_window_layers;
      t->layer_types.emplace_back(sliding ? "sliding_attention" : "full_attention");
    }
  }

  // The checkpoint's storage dtype: the top level is the model's, a nested text_config may carry a
  // stale value (Qwen-Image's says float32 for bf16 weights).
  for (const json* obj : {&top, l.text, l.owner}) {
    const std::string op = obj == &top ? "" : (obj == l.text ? p : l.owner_path);
    for (const char* key : {"dtype", "torch_dtype"}) {
      if (t->dtype.empty()) t->dtype = r.opt_string(*obj, op, key).value_or("");
    }
  }
}

void parse_token_ids(FieldReader& r, const Layout& l, ModelConfig* cfg) {
  struct Key {
    const char* name;
    const char* alias;  // Omni's spelling
    int64_t* out;
  };
  const Key keys[] = {
      {"image_token_id", "image_token_index", &cfg->image_token_id},
      {"video_token_id", "video_token_index", &cfg->video_token_id},
      {"audio_token_id", "audio_token_index", &cfg->audio_token_id},
      {"vision_start_token_id", nullptr, &cfg->vision_start_token_id},
      {"vision_end_token_id", nullptr, &cfg->vision_end_token_id},
      {"audio_start_token_id", nullptr, &cfg->audio_start_token_id},
      {"audio_end_token_id", nullptr, &cfg->audio_end_token_id},
  };
  for (const Key& k : keys) {
    auto v = r.opt_int(*l.owner, l.owner_path, k.name);
    if (!v && k.alias != nullptr) v = r.opt_int(*l.owner, l.owner_path, k.alias);
    *k.out = v.value_or(-1);
  }
}

// The special-token ids config.json declares, in lookup order (top level, text config, owner).
std::vector<const json*> id_sources(const ModelConfig& cfg, Layout* l) {
  auto located = locate(cfg.raw);
  if (!located.ok()) return {};
  *l = located.value();
  std::vector<const json*> out{&cfg.raw};
  for (const json* o : {l->text, l->owner}) {
    if (o != nullptr && std::find(out.begin(), out.end(), o) == out.end()) out.push_back(o);
  }
  return out;
}

int32_t first_id(const ModelConfig& cfg, const char* key) {
  Layout l;
  for (const json* o : id_sources(cfg, &l)) {
    FieldReader r;
    auto ids = r.int_or_list(*o, "", key);
    if (r.ok() && !ids.empty() && ids[0] >= 0 && ids[0] <= INT32_MAX) return static_cast<int32_t>(ids[0]);
  }
  return -1;
}

}  // namespace

core::Expected<ModelConfig> parse_model_config(const json& j) {
  LOOM_ASSIGN_OR_RETURN(Layout l, locate(j));
  FieldReader r;
  ModelConfig cfg;
  cfg.model_type = j.at("model_type").get<std::string>();
  if (const json* arch = FieldReader::find(j, "architectures")) {
    if (!arch->is_array() || (!arch->empty() && !(*arch)[0].is_string()))
      return core::invalid_argument("architectures: expected a list of strings, got " + arch->dump());
    if (!arch->empty()) cfg.architecture = (*arch)[0].get<std::string>();
  }
  parse_text(r, l, j, &cfg.text);
  parse_token_ids(r, l, &cfg);
  // eos/bos/pad are read later (generation config); reject malformed ones now.
  for (const json* o : {&j, l.text, l.owner}) {
    const std::string op = o == &j ? "" : (o == l.text ? l.text_path : l.owner_path);
    for (const char* key : {"eos_token_id", "bos_token_id", "pad_token_id"}) {
      for (int64_t id : r.int_or_list(*o, op, key)) {
        if (r.ok() && (id < 0 || id > INT32_MAX))
          r.fail(core::invalid_argument(config_detail::FieldReader::join(op, key) + ": token id " +
                                        std::to_string(id) + " out of range"));
      }
    }
  }
  if (!r.ok()) return r.status();
  if (cfg.text.vocab_size > INT32_MAX)
    return core::invalid_argument(FieldReader::join(l.text_path, "vocab_size") + " exceeds int32 token ids");
  cfg.raw = j;
  cfg.vision_raw = l.vision != nullptr ? *l.vision : json();
  cfg.audio_raw = l.audio != nullptr ? *l.audio : json();
  return cfg;
}

core::Expected<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::filesystem::path path = std::filesystem::path(model_dir) / "config.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return core::not_found(path.string() + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return core::io_error(path.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::invalid_argument(path.string() + ": not valid JSON");
  auto cfg = parse_model_config(j);
  if (!cfg.ok()) return cfg.status().with_context(path.string());
  return cfg;
}

std::vector<int32_t> config_eos_token_ids(const ModelConfig& cfg) {
  std::vector<int32_t> out;
  Layout l;
  for (const json* o : id_sources(cfg, &l)) {
    FieldReader r;
    for (int64_t id : r.int_or_list(*o, "", "eos_token_id")) {
      if (id < 0 || id > INT32_MAX) continue;  // rejected at parse time
      auto v = static_cast<int32_t>(id);
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
  }
  return out;
}

int32_t config_bos_token_id(const ModelConfig& cfg) {
  return first_id(cfg, "bos_token_id");
}
int32_t config_pad_token_id(const ModelConfig& cfg) {
  return first_id(cfg, "pad_token_id");
}

}  // namespace loom::models
