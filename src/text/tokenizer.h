// Hugging Face tokenizer.json (byte-level BPE) in C++: encode/decode id-for-id identical to the
// Python `tokenizers` package, plus an incremental detokenizer for streaming.
//
// Supported tokenizer.json components (anything else is a kUnsupported error at load time):
//   model          BPE (vocab, merges as "a b" strings or [a, b] pairs, unk_token, fuse_unk,
//                  byte_fallback, ignore_merges, continuing_subword_prefix, end_of_word_suffix;
//                  dropout must be null or 0)
//   normalizer     null, NFC, NFD, NFKC, NFKD, Sequence of those
//   pre_tokenizer  null, Split (Regex or String pattern, every behavior, invert), ByteLevel
//                  (add_prefix_space, use_regex), Digits, Sequence of those (ByteLevel last)
//   post_processor null, ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing,
//                  Sequence of those (used only by encode_with_post_processor)
//   decoder        null (tokens joined by spaces) or ByteLevel
//   added_tokens   all flags (special, normalized, lstrip, rstrip, single_word)
// truncation and padding are request policies, not tokenization, and are ignored.
//
// Input text must be UTF-8; invalid sequences are replaced by U+FFFD first (Rust's
// String::from_utf8_lossy), which is what `tokenizers` would see, since a Rust &str cannot hold
// invalid UTF-8.
//
// Unicode versions: Debian 12's PCRE2 (Unicode 14) and utf8proc (15) differ from the engines inside
// `tokenizers` (Oniguruma: Unicode 16; its normalizer: older tables). tokenizer_unicode_tables.h,
// measured from `tokenizers` by tools/reference/tokenizer_goldens.py, closes both gaps; what is left
// is regex script properties such as \p{Han} (Script_Extensions in PCRE2, Script in Oniguruma).
//
// Thread safety: a Tokenizer is immutable after loading; encode/decode may run concurrently on
// any number of threads (the BPE word cache is per thread). Copies share the loaded data.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace loom::text {

class Tokenizer {
 public:
  static core::Expected<Tokenizer> from_file(const std::string& tokenizer_json_path);
  static core::Expected<Tokenizer> from_json(std::string_view json_text);

  // Text -> ids, as `tokenizers`' encode(text, add_special_tokens=False): the post-processor's
  // template (e.g. Llama-3's <|begin_of_text|>) is not applied; see encode_with_post_processor.
  // parse_special=true: added tokens in the text are matched before normalization and BPE.
  // parse_special=false: tokens marked "special" are not matched and are encoded as plain text
  // (tokenizers' encode_special_tokens=True, transformers' split_special_tokens=True); non-special
  // added tokens (e.g. Qwen3's <think>, <tool_call>) are still matched, as `tokenizers` does.
  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const;

  // encode() followed by the post-processor for a single sequence: `tokenizers`'
  // encode(text, add_special_tokens=True).
  std::vector<int32_t> encode_with_post_processor(std::string_view text, bool parse_special = true) const;

  // Ids -> text, as `tokenizers`' decode: unknown ids are skipped; with skip_special_tokens, tokens
  // whose content is a special added token are skipped; bytes that are not valid UTF-8 become U+FFFD.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // Raw bytes a single token stands for (byte-level decoded; may be partial UTF-8). "" for an
  // unknown id. Without a ByteLevel decoder: the token string itself.
  std::string token_bytes(int32_t id) const;
  // The vocabulary string (e.g. "Ġhello"), or "" for an unknown id.
  std::string id_to_token(int32_t id) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  int32_t vocab_size() const;         // max id + 1, over vocab and added tokens
  bool is_special(int32_t id) const;  // added token with "special": true

  struct Impl;

 private:
  friend class IncrementalDetokenizer;
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

// Feeds ids one at a time; returns only complete UTF-8 text (holds back an incomplete multi-byte
// sequence until it completes); finish() flushes the rest (invalid bytes -> U+FFFD the way
// `tokenizers` decode does). The concatenation of all returned strings equals
// tok.decode(all ids, skip_special_tokens), and every returned string is valid UTF-8.
// Keeps its own reference to the tokenizer's data: the Tokenizer object may go away first.
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens);
  std::string push(int32_t id);
  std::string finish();

 private:
  std::shared_ptr<const Tokenizer::Impl> impl_;
  bool skip_special_;
  bool emitted_any_ = false;  // for decoders that join tokens with spaces
  std::string pending_;       // bytes of an incomplete UTF-8 sequence (at most 3)
};

}  // namespace loom::text
