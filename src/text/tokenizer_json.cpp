#include "text/tokenizer_json.h"

#include <cstdint>

namespace loom::text::detail {

namespace {

using nlohmann::json;

// nlohmann SAX handler: builds the DOM like json::parse, except that the object at
// /model/vocab and the array at /model/merges are read into TokenizerJson's flat containers.
class Reader : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJson* out) : out_(out) {}

  const std::string& error() const { return error_; }

  bool null() override { return value(json(nullptr)); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) return vocab_id(v > uint64_t{INT32_MAX} ? -1 : static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override {
    if (mode_ == Mode::kVocab) return vocab_id(-1);
    return value(json(v));
  }
  bool string(string_t& s) override {
    if (mode_ == Mode::kMerges) return merge_string(s);
    if (mode_ == Mode::kVocab) return vocab_id(-1);
    return value(json(std::move(s)));
  }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }

  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(k);
    } else {
      key_ = std::move(k);
    }
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ == Mode::kMerges) return fail("model.merges: each merge must be \"a b\" or [\"a\", \"b\"]");
    if (mode_ == Mode::kVocab) return vocab_id(-1);
    if (at_model_field("vocab")) {
      mode_ = Mode::kVocab;
      out_->has_vocab = true;
      return true;
    }
    return open(json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kNone;
      return true;
    }
    stack_.pop_back();
    path_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kVocab) return vocab_id(-1);
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ != 0) return fail("model.merges: each merge must be \"a b\" or [\"a\", \"b\"]");
      merge_depth_ = 1;
      pair_.clear();
      return true;
    }
    if (at_model_field("merges")) {
      mode_ = Mode::kMerges;
      merge_depth_ = 0;
      out_->has_merges = true;
      return true;
    }
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMerges) {
      if (merge_depth_ == 0) {
        mode_ = Mode::kNone;
        return true;
      }
      merge_depth_ = 0;
      if (pair_.size() != 2) return fail("model.merges: a merge pair must have exactly 2 strings");
      out_->merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      return true;
    }
    stack_.pop_back();
    path_.pop_back();
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = "not valid JSON (byte " + std::to_string(position) + ": " + e.what() + ")";
    return false;
  }

 private:
  enum class Mode { kNone, kVocab, kMerges };

  bool fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  // Whether the container being opened is model.<field> of the top-level object.
  bool at_model_field(std::string_view field) const {
    return stack_.size() == 2 && path_[1] == "model" && stack_.back()->is_object() && key_ == field;
  }

  json* insert(json&& v) {
    if (stack_.empty()) {
      out_->root = std::move(v);
      return &out_->root;
    }
    json* parent = stack_.back();
    if (parent->is_object()) return &((*parent)[key_] = std::move(v));
    parent->push_back(std::move(v));
    return &parent->back();
  }

  bool value(json&& v) {
    insert(std::move(v));
    return true;
  }

  bool open(json&& container) {
    const bool in_object = !stack_.empty() && stack_.back()->is_object();
    json* created = insert(std::move(container));
    stack_.push_back(created);
    path_.push_back(in_object ? key_ : std::string());
    return true;
  }

  bool vocab_id(int64_t id) {
    if (id < 0 || id > INT32_MAX) {
      return fail("model.vocab: id of '" + vocab_key_ + "' must be a non-negative 32-bit integer");
    }
    out_->vocab.insert_or_assign(vocab_key_, static_cast<int32_t>(id));
    return true;
  }

  bool merge_string(std::string& s) {
    if (merge_depth_ == 1) {
      if (pair_.size() == 2) return fail("model.merges: a merge pair must have exactly 2 strings");
      pair_.push_back(std::move(s));
      return true;
    }
    const size_t sp = s.find(' ');
    if (sp == std::string::npos) return fail("model.merges: merge '" + s + "' has no space");
    out_->merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    return true;
  }

  TokenizerJson* out_;
  std::vector<json*> stack_;       // open containers, outermost first
  std::vector<std::string> path_;  // key of each open container in its parent object ("" otherwise)
  std::string key_;                // last key read in the current DOM object
  Mode mode_ = Mode::kNone;
  std::string vocab_key_;
  int merge_depth_ = 0;  // 1 inside a [a, b] pair
  std::vector<std::string> pair_;
  std::string error_;
};

}  // namespace

core::Expected<TokenizerJson> read_tokenizer_json(std::string_view text) {
  TokenizerJson out;
  // Qwen-sized files: ~150k vocab entries and merges.
  out.vocab.reserve(text.size() / 64);
  out.merges.reserve(text.size() / 64);
  Reader reader(&out);
  const bool ok = json::sax_parse(text.begin(), text.end(), &reader);
  if (!ok) {
    return core::corrupt_data("tokenizer.json: " +
                              (reader.error().empty() ? std::string("not valid JSON") : reader.error()));
  }
  return out;
}

}  // namespace loom::text::detail
