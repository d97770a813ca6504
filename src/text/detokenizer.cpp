// IncrementalDetokenizer (declared in tokenizer.h). With the ByteLevel decoder, decode() is
// lossy-UTF-8(concatenated token bytes); lossy decoding is prefix-stable at any point that is not
// inside an incomplete sequence, so each push emits everything up to the last such point and
// keeps the (at most 3) bytes after it.
#include "text/tokenizer_impl.h"

namespace loom::text {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens)
    : impl_(tok.impl_), skip_special_(skip_special_tokens) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  const Tokenizer::Impl& im = *impl_;
  if (!im.known(id)) return {};
  if (skip_special_ && (im.id_flags[id] & Tokenizer::Impl::kSkipWhenSkippingSpecial)) return {};
  std::string out;
  if (im.decoder != detail::DecoderKind::kByteLevel) {
    // Without a decoder, tokens are joined with single spaces; token strings are valid UTF-8.
    if (emitted_any_) out.push_back(' ');
    out.append(im.token_string(id));
    emitted_any_ = true;
    return out;
  }
  pending_.append(im.token_bytes(id));
  const size_t cut = detail::utf8_decodable_prefix(pending_);
  detail::append_utf8_lossy(out, std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out;
  detail::append_utf8_lossy(out, pending_);
  pending_.clear();
  return out;
}

}  // namespace loom::text
