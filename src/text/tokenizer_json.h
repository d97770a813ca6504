// Reading tokenizer.json. The model's vocab and merges (nearly all of a 10 MB file) stream straight
// into flat containers through a SAX parser; the rest becomes a small nlohmann DOM. Internal to
// src/text/.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/status.h"
#include "text/tokenizer_string_map.h"

namespace loom::text::detail {

struct TokenizerJson {
  nlohmann::json root;  // the whole document except model.vocab and model.merges
  bool has_vocab = false;
  StringIdMap vocab;  // model.vocab
  bool has_merges = false;
  std::vector<std::pair<std::string, std::string>> merges;  // model.merges, in rank order
};

// Parses tokenizer.json text. Errors: kCorruptData (not JSON, or a vocab/merges entry of the wrong
// shape), with the byte offset where parsing stopped.
core::Expected<TokenizerJson> read_tokenizer_json(std::string_view text);

}  // namespace loom::text::detail
