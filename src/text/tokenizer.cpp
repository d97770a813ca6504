// Encode pipeline (as tokenizers' TokenizerImpl::encode_single_sequence):
//   1. split out added tokens with normalized=false on the raw text
//   2. normalize each remaining piece, split out added tokens with normalized=true
//   3. pre-tokenize each remaining piece (Split / ByteLevel / Digits steps, in order)
//   4. BPE each pre-token (ByteLevel's byte->char mapping happens inside the model, cached per word)
#include "text/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "text/tokenizer_impl.h"

namespace loom::text {

namespace {

using detail::PreTokenizerStep;
using detail::SplitBehavior;

struct Segment {
  size_t begin, end;
  bool is_match;
};

// Per-thread scratch, one vector per pre-tokenizer depth so nested steps do not clobber each other.
struct Scratch {
  std::vector<std::vector<Segment>> segments;
  std::vector<std::vector<Segment>> kept;
  std::vector<std::pair<size_t, size_t>> matches;
};

// tokenizers' NormalizedString::split: turns (range, is_match) segments into the pieces to keep.
void apply_behavior(SplitBehavior behavior, const std::vector<Segment>& segs, std::vector<Segment>* out) {
  out->clear();
  switch (behavior) {
    case SplitBehavior::kIsolated: *out = segs; break;
    case SplitBehavior::kRemoved:
      for (const Segment& s : segs) {
        if (!s.is_match) out->push_back(s);
      }
      break;
    case SplitBehavior::kContiguous:
    case SplitBehavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Segment& s : segs) {
        const bool merge = behavior == SplitBehavior::kContiguous ? s.is_match == previous_match
                                                                  : s.is_match && !previous_match;
        if (merge && !out->empty()) {
          out->back().end = s.end;
        } else {
          out->push_back(s);
        }
        previous_match = s.is_match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous_match = false;
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->is_match && !previous_match && !out->empty()) {
          out->back().begin = it->begin;
        } else {
          out->push_back(*it);
        }
        previous_match = it->is_match;
      }
      std::reverse(out->begin(), out->end());
      break;
    }
  }
}

class Encoder {
 public:
  Encoder(const Tokenizer::Impl& impl, bool parse_special, std::vector<int32_t>* out)
      : impl_(impl), skip_special_(!parse_special), out_(out) {
    if (scratch_.segments.size() < impl.pre_tokenizer.size()) {
      scratch_.segments.resize(impl.pre_tokenizer.size());
      scratch_.kept.resize(impl.pre_tokenizer.size());
    }
  }

  void run(std::string_view text) {
    if (impl_.raw_matcher.empty()) {
      normalized_stage(text);
      return;
    }
    std::vector<detail::Piece> pieces;
    impl_.raw_matcher.split(text, skip_special_, &pieces);
    for (const detail::Piece& p : pieces) {
      if (p.id >= 0) {
        out_->push_back(p.id);
      } else {
        normalized_stage(text.substr(p.begin, p.end - p.begin));
      }
    }
  }

 private:
  void normalized_stage(std::string_view piece) {
    std::string buf, tmp;
    std::string_view cur = piece;
    for (auto form : impl_.normalizers) {
      if (detail::normalize(form, cur, &tmp)) {
        buf.swap(tmp);
        cur = buf;
      }
    }
    if (impl_.normalized_matcher.empty()) {
      pre_tokenize(0, cur);
      return;
    }
    std::vector<detail::Piece> pieces;
    impl_.normalized_matcher.split(cur, skip_special_, &pieces);
    for (const detail::Piece& p : pieces) {
      if (p.id >= 0) {
        out_->push_back(p.id);
      } else {
        pre_tokenize(0, cur.substr(p.begin, p.end - p.begin));
      }
    }
  }

  void pre_tokenize(size_t step, std::string_view piece) {
    if (piece.empty()) return;  // tokenizers drops empty splits
    if (step == impl_.pre_tokenizer.size()) {
      impl_.bpe.encode_word(piece, out_);
      return;
    }
    const PreTokenizerStep& st = impl_.pre_tokenizer[step];
    switch (st.kind) {
      case PreTokenizerStep::Kind::kSplit: split_by_regex(step, st, piece, st.behavior, st.invert); return;
      case PreTokenizerStep::Kind::kByteLevel: {
        if (st.add_prefix_space && piece[0] != ' ') {
          std::string spaced;
          spaced.reserve(piece.size() + 1);
          spaced.push_back(' ');
          spaced.append(piece);
          byte_level(step, st, spaced);
        } else {
          byte_level(step, st, piece);
        }
        return;
      }
      case PreTokenizerStep::Kind::kDigits: {
        std::vector<Segment>& segs = scratch_.segments[step];
        segs.clear();
        size_t last = 0;
        for (size_t i = 0; i < piece.size();) {
          char32_t cp;
          const int len = detail::utf8_decode(piece, i, &cp);
          if (detail::is_numeric(cp)) {
            if (last < i) segs.push_back({last, i, false});
            segs.push_back({i, i + len, true});
            last = i + len;
          }
          i += len;
        }
        if (last < piece.size()) segs.push_back({last, piece.size(), false});
        emit_segments(step, piece,
                      st.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
        return;
      }
    }
  }

  void byte_level(size_t step, const PreTokenizerStep& st, std::string_view piece) {
    if (st.has_regex) {
      split_by_regex(step, st, piece, SplitBehavior::kIsolated, false);
    } else {
      pre_tokenize(step + 1, piece);
    }
  }

  void split_by_regex(size_t step, const PreTokenizerStep& st, std::string_view piece, SplitBehavior behavior,
                      bool invert) {
    scratch_.matches.clear();
    st.regex.find_all(piece, &scratch_.matches);
    std::vector<Segment>& segs = scratch_.segments[step];
    segs.clear();
    size_t prev = 0;
    for (const auto& [s, e] : scratch_.matches) {
      if (prev != s) segs.push_back({prev, s, invert});
      segs.push_back({s, e, !invert});
      prev = e;
    }
    if (prev != piece.size()) segs.push_back({prev, piece.size(), invert});
    emit_segments(step, piece, behavior);
  }

  void emit_segments(size_t step, std::string_view piece, SplitBehavior behavior) {
    const std::vector<Segment>* kept = &scratch_.segments[step];
    if (behavior != SplitBehavior::kIsolated) {
      apply_behavior(behavior, scratch_.segments[step], &scratch_.kept[step]);
      kept = &scratch_.kept[step];
    }
    for (const Segment& s : *kept) pre_tokenize(step + 1, piece.substr(s.begin, s.end - s.begin));
  }

  const Tokenizer::Impl& impl_;
  bool skip_special_;
  std::vector<int32_t>* out_;
  static thread_local Scratch scratch_;
};

thread_local Scratch Encoder::scratch_;

}  // namespace

core::Expected<Tokenizer> Tokenizer::from_json(std::string_view json_text) {
  LOOM_ASSIGN_OR_RETURN(auto impl, load_tokenizer_impl(json_text));
  return Tokenizer(std::move(impl));
}

core::Expected<Tokenizer> Tokenizer::from_file(const std::string& tokenizer_json_path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(tokenizer_json_path, ec)) {
    return core::not_found("tokenizer file not found: " + tokenizer_json_path);
  }
  std::ifstream in(tokenizer_json_path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return core::io_error("cannot read " + tokenizer_json_path);
  auto tok = from_json(ss.str());
  if (!tok.ok()) return tok.status().with_context(tokenizer_json_path);
  return tok;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  std::string repaired;
  if (!detail::is_valid_utf8(text)) {
    detail::append_utf8_lossy(repaired, text);
    text = repaired;
  }
  Encoder(*impl_, parse_special, &ids).run(text);
  return ids;
}

std::vector<int32_t> Tokenizer::encode_with_post_processor(std::string_view text, bool parse_special) const {
  std::vector<int32_t> ids = encode(text, parse_special);
  for (const detail::PostProcessorStep& step : impl_->post_processor) {
    std::vector<int32_t> next;
    next.reserve(ids.size() + 4);
    for (const detail::TemplateItem& item : step) {
      const auto& src = item.is_sequence ? ids : item.ids;
      next.insert(next.end(), src.begin(), src.end());
    }
    ids.swap(next);
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  const Impl& im = *impl_;
  std::string text;
  bool first = true;
  for (int32_t id : ids) {
    if (!im.known(id)) continue;
    if (skip_special_tokens && (im.id_flags[id] & Impl::kSkipWhenSkippingSpecial)) continue;
    if (im.decoder == detail::DecoderKind::kByteLevel) {
      text.append(im.token_bytes(id));
    } else {
      if (!first) text.push_back(' ');
      text.append(im.token_string(id));
    }
    first = false;
  }
  if (im.decoder != detail::DecoderKind::kByteLevel || detail::is_valid_utf8(text)) return text;
  std::string repaired;
  detail::append_utf8_lossy(repaired, text);
  return repaired;
}

std::string Tokenizer::token_bytes(int32_t id) const {
  return impl_->known(id) ? std::string(impl_->token_bytes(id)) : std::string();
}

std::string Tokenizer::id_to_token(int32_t id) const {
  return impl_->known(id) ? std::string(impl_->token_string(id)) : std::string();
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added_by_content.find(token)) return id;
  return impl_->bpe.vocab().find(token);
}

int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

bool Tokenizer::is_special(int32_t id) const {
  return impl_->known(id) && (impl_->id_flags[id] & Impl::kSpecial);
}

}  // namespace loom::text
