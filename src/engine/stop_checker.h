// Stop conditions of one sequence: end-of-sequence and stop_token_ids, stop strings in the
// detokenized text, min_tokens and max_tokens. Semantics follow vLLM v1 (scheduler check_stop +
// detokenizer stop strings), with two deliberate refinements noted below.
//
// Usage, once per generated token (after the sampler, with the incremental detokenizer's delta):
//
//   StopChecker stop(params, eos_ids, max_model_len - prompt_len);
//   for (;;) {
//     int32_t tok = sampler.sample(...).token;
//     FinishReason r = stop.append(tok, detok.step(tok));
//     send(stop.take_stream_text());          // stable text only; never retracted later
//     if (r != FinishReason::kNone) break;    // stop.text() is the final output
//   }
//
// Rules, checked in this order for the token just appended (its number n counts from 1):
//   1. Token stops: the token is an eos id (unless ignore_eos) or in stop_token_ids -> kStop. Its text
//      is left out of the output unless include_stop_str_in_output (vLLM).
//   2. Stop strings: the earliest-ending occurrence of any stop string that ends inside the text this
//      token added (it may begin in earlier tokens' text, even text of the first min_tokens tokens)
//      -> kStop; the output is cut at the start of the match, or at its end with
//      include_stop_str_in_output. Ties on the end position go to stop-list order. (vLLM takes the
//      first string in list order that matches anywhere in the new text; the earliest end is what
//      checking after every character would give, independent of how text splits into tokens.)
//   3. Length: n reaches min(max_tokens, max_new_tokens) -> kLength (a stop on the same token wins:
//      "stop" says more than "length").
//   Rules 1 and 2 apply only when n > min_tokens: the first min_tokens tokens never stop a sequence
//   (Sampler masks eos / stop_token_ids during them, so rule 1 is normally not reachable there).
//
// Streaming hold-back: while a sequence runs, the tail of the text that is a proper prefix of some
// stop string is held back (vLLM holds a fixed max(len(stop)) - 1 characters; holding only a
// possible match streams sooner and is still never retracted). With include_stop_str_in_output
// nothing is held: text up to the end of a match is output anyway, and text after it arrives in the
// same append() and is cut before it is handed out. Once finished, all remaining text is released.
//
// Text is UTF-8 and matched bytewise; that equals matching code points because UTF-8 is
// self-synchronising. Deltas should be whole characters (the incremental detokenizer holds back
// incomplete sequences), so held-back boundaries fall between characters.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampling_params.h"

namespace loom::engine {

enum class FinishReason { kNone, kStop, kLength };

// "stop" / "length" for OpenAI's finish_reason; kNone -> "" (still running).
std::string_view finish_reason_name(FinishReason r);

class StopChecker {
 public:
  // eos_token_ids: the model's end-of-sequence ids (tokenizer eos plus generation_config's
  // eos_token_id list); all of them are ignored with params.ignore_eos. max_new_tokens: how many
  // tokens the context window leaves (max_model_len - prompt_len), >= 1 (admission rejects prompts
  // that leave no room). params should have passed validate().
  StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids, int32_t max_new_tokens);

  // Feeds the next generated token and the text it added (may be empty). Returns the finish reason
  // after it (kNone: keep going). Must not be called once finished.
  FinishReason append(int32_t token, std::string_view text);

  // Text that became final since the last call (see hold-back above); the concatenation of all
  // calls is text() once finished.
  std::string take_stream_text();

  // The output text so far: cut at a matched stop string; while running it includes held-back text.
  const std::string& text() const { return text_; }
  FinishReason finish_reason() const { return finish_; }
  bool finished() const { return finish_ != FinishReason::kNone; }
  int32_t num_tokens() const { return num_tokens_; }
  // min(params.max_tokens, max_new_tokens), or max_new_tokens when max_tokens is -1.
  int32_t max_tokens() const { return max_tokens_; }

  // Why a kStop happened, for vLLM's stop_reason: the stop string matched (empty if none) ...
  const std::string& stop_string() const { return stop_string_; }
  // ... or the token that stopped the sequence (an eos id or one of stop_token_ids) ...
  std::optional<int32_t> stop_token() const { return stop_token_; }
  // ... and whether that token was an eos id (vLLM reports stop_reason null for eos).
  bool stopped_on_eos() const { return stopped_on_eos_; }

 private:
  // Longest suffix of text_ that is a proper prefix of a stop string (0 with include_stop_str).
  size_t held_back_bytes() const;

  std::vector<std::string> stop_;
  std::vector<int32_t> stop_token_ids_;
  std::vector<int32_t> eos_token_ids_;  // empty with ignore_eos
  bool include_stop_str_ = false;
  int32_t min_tokens_ = 0;
  int32_t max_tokens_ = 0;

  std::string text_;
  size_t emitted_ = 0;  // bytes of text_ already returned by take_stream_text
  int32_t num_tokens_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  std::string stop_string_;
  std::optional<int32_t> stop_token_;
  bool stopped_on_eos_ = false;
};

}  // namespace loom::engine
