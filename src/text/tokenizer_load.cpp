// tokenizer.json -> Tokenizer::Impl. Mirrors how `tokenizers` deserializes a tokenizer: the model,
// normalizer, pre-tokenizer, post-processor and decoder, then the added tokens, whose ids are
// (re)assigned exactly as Tokenizer::add_tokens does.
#include <nlohmann/json.hpp>

#include <algorithm>

#include "text/tokenizer_impl.h"
#include "text/tokenizer_json.h"

namespace loom::text {

namespace {

using detail::PreTokenizerStep;
using detail::SplitBehavior;
using nlohmann::json;

// GPT-2's pre-tokenizer pattern, used by ByteLevel when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

core::Status bad(std::string_view where, std::string_view what) {
  return core::corrupt_data("tokenizer.json: " + std::string(where) + ": " + std::string(what));
}

// Optional boolean field (absent or null -> fallback).
core::Expected<bool> get_bool(const json& obj, const char* key, bool fallback, std::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return bad(where, std::string("'") + key + "' must be a boolean");
  return it->get<bool>();
}

// Optional string field (absent or null -> nullopt).
core::Expected<std::optional<std::string>> get_opt_string(const json& obj, const char* key,
                                                          std::string_view where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return bad(where, std::string("'") + key + "' must be a string");
  return std::optional<std::string>(it->get<std::string>());
}

core::Expected<std::string> get_type(const json& obj, std::string_view where) {
  if (!obj.is_object()) return bad(where, "must be an object");
  auto it = obj.find("type");
  if (it == obj.end() || !it->is_string()) return bad(where, "missing 'type'");
  return it->get<std::string>();
}

core::Expected<detail::BpeModel> load_model(detail::TokenizerJson& tj, bool byte_level_input) {
  const json& root = tj.root;
  auto mit = root.find("model");
  if (mit == root.end() || !mit->is_object()) return bad("model", "missing");
  const json& m = *mit;
  std::string type;
  if (auto t = m.find("type"); t != m.end() && t->is_string()) {
    type = t->get<std::string>();
  } else if (tj.has_merges) {
    type = "BPE";  // files from older versions have no model type
  }
  if (type != "BPE") {
    return core::unsupported("tokenizer.json: model type '" + (type.empty() ? std::string("?") : type) +
                             "' is not supported (only BPE)");
  }
  if (auto d = m.find("dropout"); d != m.end() && !d->is_null()) {
    if (!d->is_number()) return bad("model", "'dropout' must be a number");
    if (d->get<double>() != 0.0) return core::unsupported("tokenizer.json: BPE dropout is not supported");
  }

  detail::BpeConfig cfg;
  cfg.byte_level_input = byte_level_input;
  if (!tj.has_vocab) return bad("model", "'vocab' must be an object");
  cfg.vocab = std::move(tj.vocab);
  if (auto mg = m.find("merges"); mg != m.end() && !mg->is_null()) {
    return bad("model", "'merges' must be an array");  // an array would have been read by the SAX reader
  }
  cfg.merges = std::move(tj.merges);
  LOOM_ASSIGN_OR_RETURN(cfg.unk_token, get_opt_string(m, "unk_token", "model"));
  LOOM_ASSIGN_OR_RETURN(auto prefix, get_opt_string(m, "continuing_subword_prefix", "model"));
  LOOM_ASSIGN_OR_RETURN(auto suffix, get_opt_string(m, "end_of_word_suffix", "model"));
  cfg.continuing_subword_prefix = prefix.value_or("");
  cfg.end_of_word_suffix = suffix.value_or("");
  LOOM_ASSIGN_OR_RETURN(cfg.fuse_unk, get_bool(m, "fuse_unk", false, "model"));
  LOOM_ASSIGN_OR_RETURN(cfg.byte_fallback, get_bool(m, "byte_fallback", false, "model"));
  LOOM_ASSIGN_OR_RETURN(cfg.ignore_merges, get_bool(m, "ignore_merges", false, "model"));
  auto model = detail::BpeModel::create(std::move(cfg));
  if (!model.ok()) return model.status().with_context("tokenizer.json");
  return model;
}

core::Status load_normalizer(const json& n, std::vector<detail::NormalizationForm>* out) {
  if (n.is_null()) return {};
  LOOM_ASSIGN_OR_RETURN(std::string type, get_type(n, "normalizer"));
  if (type == "NFC") {
    out->push_back(detail::NormalizationForm::kNfc);
  } else if (type == "NFD") {
    out->push_back(detail::NormalizationForm::kNfd);
  } else if (type == "NFKC") {
    out->push_back(detail::NormalizationForm::kNfkc);
  } else if (type == "NFKD") {
    out->push_back(detail::NormalizationForm::kNfkd);
  } else if (type == "Sequence") {
    auto it = n.find("normalizers");
    if (it == n.end() || !it->is_array()) return bad("normalizer", "Sequence needs 'normalizers'");
    for (const json& sub : *it) LOOM_RETURN_IF_ERROR(load_normalizer(sub, out));
  } else {
    return core::unsupported("tokenizer.json: normalizer '" + type + "' is not supported");
  }
  return {};
}

core::Expected<SplitBehavior> parse_behavior(const json& p) {
  auto it = p.find("behavior");
  if (it == p.end() || !it->is_string()) return bad("pre_tokenizer", "Split needs 'behavior'");
  const std::string& b = it->get_ref<const std::string&>();
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return bad("pre_tokenizer", "unknown Split behavior '" + b + "'");
}

core::Status load_pre_tokenizer(const json& p, std::vector<PreTokenizerStep>* out) {
  if (p.is_null()) return {};
  LOOM_ASSIGN_OR_RETURN(std::string type, get_type(p, "pre_tokenizer"));
  PreTokenizerStep step;
  if (type == "Sequence") {
    auto it = p.find("pretokenizers");
    if (it == p.end() || !it->is_array()) return bad("pre_tokenizer", "Sequence needs 'pretokenizers'");
    for (const json& sub : *it) LOOM_RETURN_IF_ERROR(load_pre_tokenizer(sub, out));
    return {};
  } else if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    auto pat = p.find("pattern");
    if (pat == p.end() || !pat->is_object()) return bad("pre_tokenizer", "Split needs a 'pattern' object");
    core::Expected<detail::Regex> re = core::invalid_argument("");
    if (auto r = pat->find("Regex"); r != pat->end() && r->is_string()) {
      re = detail::Regex::from_oniguruma(r->get_ref<const std::string&>());
    } else if (auto s = pat->find("String"); s != pat->end() && s->is_string()) {
      re = detail::Regex::literal(s->get_ref<const std::string&>());
    } else {
      return bad("pre_tokenizer", "Split pattern must be {\"Regex\": ...} or {\"String\": ...}");
    }
    if (!re.ok()) return re.status().with_context("tokenizer.json");
    step.regex = std::move(re).value();
    step.has_regex = true;
    LOOM_ASSIGN_OR_RETURN(step.behavior, parse_behavior(p));
    LOOM_ASSIGN_OR_RETURN(step.invert, get_bool(p, "invert", false, "pre_tokenizer"));
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    LOOM_ASSIGN_OR_RETURN(step.add_prefix_space, get_bool(p, "add_prefix_space", true, "pre_tokenizer"));
    LOOM_ASSIGN_OR_RETURN(bool use_regex, get_bool(p, "use_regex", true, "pre_tokenizer"));
    if (use_regex) {
      auto re = detail::Regex::from_oniguruma(kGpt2Pattern);
      if (!re.ok()) return re.status();
      step.regex = std::move(re).value();
      step.has_regex = true;
    }
  } else if (type == "Digits") {
    step.kind = PreTokenizerStep::Kind::kDigits;
    LOOM_ASSIGN_OR_RETURN(step.individual_digits, get_bool(p, "individual_digits", false, "pre_tokenizer"));
  } else {
    return core::unsupported("tokenizer.json: pre_tokenizer '" + type + "' is not supported");
  }
  out->push_back(std::move(step));
  return {};
}

core::Expected<std::vector<int32_t>> template_special_ids(const json& p, const std::string& name) {
  auto st = p.find("special_tokens");
  if (st == p.end() || !st->is_object())
    return bad("post_processor", "TemplateProcessing needs 'special_tokens'");
  auto it = st->find(name);
  if (it == st->end()) return bad("post_processor", "template uses unknown special token '" + name + "'");
  auto ids = it->find("ids");
  if (ids == it->end() || !ids->is_array())
    return bad("post_processor", "special token '" + name + "' has no ids");
  std::vector<int32_t> out;
  for (const json& id : *ids) {
    if (!id.is_number_integer()) return bad("post_processor", "special token ids must be integers");
    out.push_back(id.get<int32_t>());
  }
  return out;
}

core::Status load_post_processor(const json& p, std::vector<detail::PostProcessorStep>* out) {
  if (p.is_null()) return {};
  LOOM_ASSIGN_OR_RETURN(std::string type, get_type(p, "post_processor"));
  if (type == "Sequence") {
    auto it = p.find("processors");
    if (it == p.end() || !it->is_array()) return bad("post_processor", "Sequence needs 'processors'");
    for (const json& sub : *it) LOOM_RETURN_IF_ERROR(load_post_processor(sub, out));
    return {};
  }
  if (type == "ByteLevel") return {};  // only adjusts offsets
  detail::PostProcessorStep step;
  if (type == "TemplateProcessing") {
    auto single = p.find("single");
    if (single == p.end() || !single->is_array())
      return bad("post_processor", "TemplateProcessing needs 'single'");
    for (const json& piece : *single) {
      detail::TemplateItem item;
      if (auto s = piece.find("Sequence"); s != piece.end()) {
        item.is_sequence = true;
      } else if (auto sp = piece.find("SpecialToken");
                 sp != piece.end() && sp->contains("id") && (*sp)["id"].is_string()) {
        LOOM_ASSIGN_OR_RETURN(item.ids, template_special_ids(p, (*sp)["id"].get<std::string>()));
      } else {
        return bad("post_processor", "template pieces must be Sequence or SpecialToken");
      }
      step.push_back(std::move(item));
    }
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    auto cls = p.find("cls"), sep = p.find("sep");
    if (cls == p.end() || sep == p.end() || !cls->is_array() || !sep->is_array() || cls->size() != 2 ||
        sep->size() != 2 || !(*cls)[1].is_number_integer() || !(*sep)[1].is_number_integer()) {
      return bad("post_processor", type + " needs 'cls' and 'sep' as [token, id]");
    }
    step.push_back({false, {(*cls)[1].get<int32_t>()}});
    step.push_back({true, {}});
    step.push_back({false, {(*sep)[1].get<int32_t>()}});
  } else {
    return core::unsupported("tokenizer.json: post_processor '" + type + "' is not supported");
  }
  out->push_back(std::move(step));
  return {};
}

core::Expected<detail::DecoderKind> load_decoder(const json& d) {
  if (d.is_null()) return detail::DecoderKind::kNone;
  LOOM_ASSIGN_OR_RETURN(std::string type, get_type(d, "decoder"));
  if (type == "ByteLevel") return detail::DecoderKind::kByteLevel;
  return core::unsupported("tokenizer.json: decoder '" + type + "' is not supported");
}

// Added tokens in file order, with ids assigned like tokenizers' AddedVocabulary::add_tokens: a
// content already known (model vocab or earlier added token) keeps that id; a new one gets the next
// id after the model vocab / the largest added id. The file's "id" field is not authoritative
// (tokenizers only warns when it differs).
core::Status load_added_tokens(const json& root, Tokenizer::Impl* impl) {
  auto at = root.find("added_tokens");
  if (at == root.end() || at->is_null()) return {};
  if (!at->is_array()) return bad("added_tokens", "must be an array");
  const auto& vocab = impl->bpe.vocab();
  const auto model_vocab_size = static_cast<int64_t>(vocab.size());
  std::vector<detail::AddedToken> specials, classics;  // matching order: specials first
  std::unordered_map<std::string, size_t> special_index, classic_index;
  int64_t max_added = -1;
  for (const json& t : *at) {
    if (!t.is_object()) return bad("added_tokens", "entries must be objects");
    detail::AddedToken tok;
    auto content = t.find("content");
    if (content == t.end() || !content->is_string()) return bad("added_tokens", "entry without 'content'");
    tok.content = content->get<std::string>();
    LOOM_ASSIGN_OR_RETURN(tok.special, get_bool(t, "special", false, "added_tokens"));
    LOOM_ASSIGN_OR_RETURN(tok.single_word, get_bool(t, "single_word", false, "added_tokens"));
    LOOM_ASSIGN_OR_RETURN(tok.lstrip, get_bool(t, "lstrip", false, "added_tokens"));
    LOOM_ASSIGN_OR_RETURN(tok.rstrip, get_bool(t, "rstrip", false, "added_tokens"));
    LOOM_ASSIGN_OR_RETURN(tok.normalized, get_bool(t, "normalized", !tok.special, "added_tokens"));
    if (tok.content.empty()) continue;
    if (const auto known = impl->added_by_content.find(tok.content)) {
      tok.id = *known;
    } else if (const auto in_vocab = vocab.find(tok.content)) {
      tok.id = *in_vocab;
    } else {
      const int64_t id = max_added < 0                                              ? model_vocab_size
                         : (max_added >= model_vocab_size || model_vocab_size == 0) ? max_added + 1
                                                                                    : model_vocab_size;
      if (id > INT32_MAX) return bad("added_tokens", "too many tokens");
      tok.id = static_cast<int32_t>(id);
    }
    impl->added_by_content.insert_or_assign(tok.content, tok.id);
    max_added = std::max<int64_t>(max_added, tok.id);
    // A re-added content replaces the earlier definition in place.
    auto& index = tok.special ? special_index : classic_index;
    auto& list = tok.special ? specials : classics;
    if (auto it = index.find(tok.content); it != index.end()) {
      list[it->second] = tok;
    } else {
      index[tok.content] = list.size();
      list.push_back(tok);
    }
  }
  impl->added_tokens = specials;
  for (const auto& t : classics) {
    if (!special_index.count(t.content)) impl->added_tokens.push_back(t);
  }

  std::vector<std::string> raw_patterns, norm_patterns;
  std::vector<detail::AddedToken> raw_tokens, norm_tokens;
  for (auto& t : impl->added_tokens) {
    t.decode_form = t.content;
    if (t.normalized) {
      std::string tmp;
      for (auto form : impl->normalizers) {
        if (detail::normalize(form, t.decode_form, &tmp)) t.decode_form = tmp;
      }
      norm_patterns.push_back(t.decode_form);
      norm_tokens.push_back(t);
    } else {
      raw_patterns.push_back(t.content);
      raw_tokens.push_back(t);
    }
  }
  impl->raw_matcher = detail::AddedTokenMatcher(raw_patterns, raw_tokens);
  impl->normalized_matcher = detail::AddedTokenMatcher(norm_patterns, norm_tokens);
  return {};
}

void build_id_tables(Tokenizer::Impl* impl) {
  int64_t max_id = -1;
  impl->bpe.vocab().for_each([&](std::string_view, int32_t id) { max_id = std::max<int64_t>(max_id, id); });
  for (const auto& t : impl->added_tokens) max_id = std::max<int64_t>(max_id, t.id);
  const auto n = static_cast<int32_t>(max_id + 1);
  impl->vocab_size = n;
  std::vector<std::string_view> strings(n);
  impl->id_flags.assign(n, 0);
  impl->bpe.vocab().for_each([&](std::string_view tok, int32_t id) {
    strings[id] = tok;
    impl->id_flags[id] |= Tokenizer::Impl::kKnown;
  });
  std::unordered_map<std::string_view, bool> special_contents;
  for (const auto& t : impl->added_tokens) {
    strings[t.id] = t.decode_form;  // the added vocabulary wins in id_to_token
    impl->id_flags[t.id] |= Tokenizer::Impl::kKnown;
    if (t.special) {
      impl->id_flags[t.id] |= Tokenizer::Impl::kSpecial;
      special_contents[t.content] = true;
    }
  }
  const detail::ByteLevelAlphabet& alpha = detail::byte_level_alphabet();
  impl->token_offsets.assign(n + 1, 0);
  impl->bytes_offsets.assign(n + 1, 0);
  std::string bytes;
  for (int32_t id = 0; id < n; ++id) {
    const std::string_view s = strings[id];
    // decode() filters on the token string (tokenizers' is_special_token(id_to_token(id))): a model
    // token spelled like a special one is skipped too, a normalized special token whose normalized
    // form differs from its content is not.
    if (special_contents.count(s)) impl->id_flags[id] |= Tokenizer::Impl::kSkipWhenSkippingSpecial;
    impl->token_strings.append(s);
    impl->token_offsets[id + 1] = static_cast<uint32_t>(impl->token_strings.size());
    // ByteLevel decoder: map every character back to its byte; a token with any character outside
    // the alphabet contributes its UTF-8 text unchanged.
    bytes.clear();
    bool all_mapped = impl->decoder == detail::DecoderKind::kByteLevel;
    for (size_t i = 0; all_mapped && i < s.size();) {
      char32_t cp;
      i += detail::utf8_decode(s, i, &cp);
      const int b = alpha.char_to_byte(cp);
      if (b < 0) all_mapped = false;
      bytes.push_back(static_cast<char>(b));
    }
    impl->token_byte_strings.append(all_mapped ? std::string_view(bytes) : s);
    impl->bytes_offsets[id + 1] = static_cast<uint32_t>(impl->token_byte_strings.size());
  }
}

core::Expected<std::shared_ptr<const Tokenizer::Impl>> load_impl(detail::TokenizerJson& tj) {
  const json& root = tj.root;
  if (!root.is_object()) return bad("top level", "must be an object");
  auto impl = std::make_shared<Tokenizer::Impl>();
  if (auto n = root.find("normalizer"); n != root.end())
    LOOM_RETURN_IF_ERROR(load_normalizer(*n, &impl->normalizers));
  if (auto p = root.find("pre_tokenizer"); p != root.end()) {
    LOOM_RETURN_IF_ERROR(load_pre_tokenizer(*p, &impl->pre_tokenizer));
  }
  bool byte_level_input = false;
  for (size_t i = 0; i < impl->pre_tokenizer.size(); ++i) {
    if (impl->pre_tokenizer[i].kind != PreTokenizerStep::Kind::kByteLevel) continue;
    // The byte mapping is applied when the model reads a word, so nothing may split after it.
    if (i + 1 != impl->pre_tokenizer.size()) {
      return core::unsupported("tokenizer.json: ByteLevel must be the last pre-tokenizer of a Sequence");
    }
    byte_level_input = true;
  }
  if (auto p = root.find("post_processor"); p != root.end()) {
    LOOM_RETURN_IF_ERROR(load_post_processor(*p, &impl->post_processor));
  }
  if (auto d = root.find("decoder"); d != root.end()) {
    LOOM_ASSIGN_OR_RETURN(impl->decoder, load_decoder(*d));
  }
  LOOM_ASSIGN_OR_RETURN(impl->bpe, load_model(tj, byte_level_input));
  LOOM_RETURN_IF_ERROR(load_added_tokens(root, impl.get()));
  build_id_tables(impl.get());
  return std::shared_ptr<const Tokenizer::Impl>(std::move(impl));
}

}  // namespace

core::Expected<std::shared_ptr<const Tokenizer::Impl>> load_tokenizer_impl(std::string_view json_text) {
  LOOM_ASSIGN_OR_RETURN(detail::TokenizerJson tj, detail::read_tokenizer_json(json_text));
  try {
    const json& root = tj.root;
    if (root.is_object()) {
      if (auto v = root.find("version");
          v != root.end() && !(v->is_string() && v->get<std::string>() == "1.0")) {
        return core::unsupported("tokenizer.json: unknown format version " + v->dump());
      }
    }
    return load_impl(tj);
  } catch (const json::exception& e) {  // a value of an unexpected type deep inside
    return bad("structure", e.what());
  }
}

}  // namespace loom::text
