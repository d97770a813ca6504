#include "engine/stop_checker.h"

#include <algorithm>

#include "core/check.h"

namespace loom::engine {

std::string_view finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kNone: return "";
  }
  return "";
}

StopChecker::StopChecker(const SamplingParams& params, std::span<const int32_t> eos_token_ids,
                         int32_t max_new_tokens)
    : stop_(params.stop),
      stop_token_ids_(params.stop_token_ids),
      include_stop_str_(params.include_stop_str_in_output),
      min_tokens_(params.min_tokens) {
  LOOM_CHECK(max_new_tokens >= 1) << "no room for output tokens (max_new_tokens " << max_new_tokens << ")";
  max_tokens_ = params.max_tokens > 0 ? std::min(params.max_tokens, max_new_tokens) : max_new_tokens;
  if (!params.ignore_eos) eos_token_ids_.assign(eos_token_ids.begin(), eos_token_ids.end());
  for (const std::string& s : stop_) LOOM_CHECK(!s.empty()) << "empty stop string (validate() rejects it)";
}

FinishReason StopChecker::append(int32_t token, std::string_view text) {
  LOOM_CHECK(!finished()) << "append after the sequence finished";
  ++num_tokens_;
  // The first min_tokens tokens never stop the sequence.
  const bool may_stop = num_tokens_ > min_tokens_;

  // 1. Token stops. The stopping token's text is dropped unless include_stop_str_in_output.
  if (may_stop) {
    const bool is_eos =
        std::find(eos_token_ids_.begin(), eos_token_ids_.end(), token) != eos_token_ids_.end();
    const bool is_stop_id =
        std::find(stop_token_ids_.begin(), stop_token_ids_.end(), token) != stop_token_ids_.end();
    if (is_eos || is_stop_id) {
      if (include_stop_str_) text_.append(text);
      finish_ = FinishReason::kStop;
      stop_token_ = token;
      stopped_on_eos_ = is_eos;
      return finish_;
    }
  }

  const size_t old_len = text_.size();
  text_.append(text);

  // 2. Stop strings: only matches ending inside the new text are new (older ones were checked, or
  // lay in the min_tokens region). The earliest end wins; ties keep list order.
  if (may_stop && !text.empty()) {
    size_t best_end = std::string::npos, best_start = 0;
    const std::string* best = nullptr;
    for (const std::string& s : stop_) {
      const size_t from = old_len + 1 >= s.size() ? old_len + 1 - s.size() : 0;
      const size_t pos = text_.find(s, from);
      if (pos == std::string::npos) continue;
      if (pos + s.size() < best_end) {
        best_end = pos + s.size();
        best_start = pos;
        best = &s;
      }
    }
    if (best != nullptr) {
      const size_t cut = include_stop_str_ ? best_end : best_start;
      // Hold-back guarantees the cut never reaches text already streamed.
      LOOM_CHECK(cut >= emitted_) << "stop string cut " << cut << " before streamed text " << emitted_;
      text_.resize(cut);
      finish_ = FinishReason::kStop;
      stop_string_ = *best;
      return finish_;
    }
  }

  // 3. Length.
  if (num_tokens_ >= max_tokens_) finish_ = FinishReason::kLength;
  return finish_;
}

size_t StopChecker::held_back_bytes() const {
  if (include_stop_str_) return 0;
  size_t held = 0;
  for (const std::string& s : stop_) {
    // Longest proper prefix of s that the text ends with.
    for (size_t len = std::min(s.size() - 1, text_.size()); len > held; --len) {
      if (text_.compare(text_.size() - len, len, s, 0, len) == 0) {
        held = len;
        break;
      }
    }
  }
  return held;
}

std::string StopChecker::take_stream_text() {
  size_t stable = finished() ? text_.size() : text_.size() - held_back_bytes();
  stable = std::max(stable, emitted_);
  std::string out = text_.substr(emitted_, stable - emitted_);
  emitted_ = stable;
  return out;
}

}  // namespace loom::engine
