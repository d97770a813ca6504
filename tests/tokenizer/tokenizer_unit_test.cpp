// Tokenizer behaviour that the golden corpus does not pin down: load errors, invalid UTF-8 input,
// incremental detokenizer edge cases, the NFC fast path, the regex translation, long inputs.
#include <gtest/gtest.h>

#include <random>

#include "core/check.h"
#include "text/tokenizer.h"
#include "text/tokenizer_regex.h"
#include "text/tokenizer_unicode.h"

namespace loom::text {
namespace {

const Tokenizer& test_tokenizer() {
  static const Tokenizer tok = [] {
    auto t = Tokenizer::from_file(LOOM_FIXTURES_DIR "/tokenizer/tokenizer.json");
    LOOM_CHECK(t.ok()) << t.status().to_string();
    return std::move(t).value();
  }();
  return tok;
}

// A minimal BPE tokenizer.json around a model / pre-tokenizer fragment.
std::string tiny_json(const std::string& model, const std::string& extra = "") {
  return R"({"version": "1.0", "added_tokens": [], "normalizer": null, "pre_tokenizer": null,
             "post_processor": null, "decoder": null, "model": )" +
         model + extra + "}";
}

constexpr const char* kTinyModel =
    R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4}, "merges": ["a b", ["ab", "c"]]})";

void expect_error(const std::string& json, core::StatusCode code, const std::string& fragment) {
  auto t = Tokenizer::from_json(json);
  ASSERT_FALSE(t.ok()) << "loaded: " << json;
  EXPECT_EQ(t.status().code(), code) << t.status().to_string();
  EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().to_string();
}

TEST(TokenizerLoad, MissingFileIsNotFound) {
  auto t = Tokenizer::from_file("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), core::StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);
  EXPECT_EQ(Tokenizer::from_file(LOOM_FIXTURES_DIR).status().code(),
            core::StatusCode::kNotFound);  // a directory
}

TEST(TokenizerLoad, MalformedJsonIsCorruptData) {
  expect_error("{\"model\": {", core::StatusCode::kCorruptData, "not valid JSON");
  expect_error("", core::StatusCode::kCorruptData, "not valid JSON");
  expect_error("[1, 2]", core::StatusCode::kCorruptData, "must be an object");
  expect_error("{}", core::StatusCode::kCorruptData, "model");
  expect_error(tiny_json(R"({"type": "BPE", "vocab": {"a": "zero"}, "merges": []})"),
               core::StatusCode::kCorruptData, "non-negative 32-bit integer");
  expect_error(tiny_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]})"),
               core::StatusCode::kCorruptData, "has no space");
  expect_error(tiny_json(kTinyModel, R"(, "added_tokens": [{"id": 9, "content": 5}])"),
               core::StatusCode::kCorruptData, "content");
  expect_error(tiny_json(kTinyModel, R"(, "normalizer": {"normalizers": []})"),
               core::StatusCode::kCorruptData, "type");
}

TEST(TokenizerLoad, UnsupportedComponentsAreUnsupported) {
  using core::StatusCode;
  expect_error(tiny_json(R"({"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "a"})"),
               StatusCode::kUnsupported, "WordPiece");
  expect_error(tiny_json(R"({"type": "Unigram", "vocab": [["a", 0.0]]})"), StatusCode::kUnsupported,
               "Unigram");
  expect_error(tiny_json(R"({"type": "WordLevel", "vocab": {"a": 0}})"), StatusCode::kUnsupported,
               "WordLevel");
  expect_error(tiny_json(R"({"type": "BPE", "dropout": 0.1, "vocab": {"a": 0}, "merges": []})"),
               StatusCode::kUnsupported, "dropout");
  expect_error(tiny_json(kTinyModel, R"(, "normalizer": {"type": "Lowercase"})"), StatusCode::kUnsupported,
               "Lowercase");
  expect_error(tiny_json(kTinyModel, R"(, "pre_tokenizer": {"type": "Metaspace", "replacement": "_"})"),
               StatusCode::kUnsupported, "Metaspace");
  expect_error(tiny_json(kTinyModel, R"(, "decoder": {"type": "WordPiece", "prefix": "##"})"),
               StatusCode::kUnsupported, "WordPiece");
  expect_error(tiny_json(kTinyModel, R"(, "post_processor": {"type": "Whatever"})"), StatusCode::kUnsupported,
               "Whatever");
  expect_error(tiny_json(kTinyModel, R"(, "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                 {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
                 {"type": "Digits", "individual_digits": true}]})"),
               StatusCode::kUnsupported, "ByteLevel must be the last");
  std::string v2 = tiny_json(kTinyModel);
  v2.replace(v2.find("1.0"), 3, "2.0");
  expect_error(v2, StatusCode::kUnsupported, "version");
}

TEST(TokenizerLoad, InconsistentModelIsInvalidArgument) {
  using core::StatusCode;
  expect_error(tiny_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a c"]})"),
               StatusCode::kInvalidArgument, "not in the vocab");
  expect_error(tiny_json(R"({"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": ["a b"]})"),
               StatusCode::kInvalidArgument, "makes 'ab'");
  expect_error(tiny_json(R"({"type": "BPE", "vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"})"),
               StatusCode::kInvalidArgument, "<unk>");
  expect_error(tiny_json(kTinyModel, R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"},
                 "behavior": "Isolated", "invert": false})"),
               StatusCode::kInvalidArgument, "regex");
}

TEST(TokenizerLoad, MinimalBpeWithoutPreTokenizerOrDecoder) {
  auto t = Tokenizer::from_json(tiny_json(kTinyModel));
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_EQ(t->encode("abcab"), (std::vector<int32_t>{4, 3}));  // merges "a b" then "ab c"
  EXPECT_EQ(t->encode("cba"), (std::vector<int32_t>{2, 1, 0}));
  EXPECT_EQ(t->encode("xax"), (std::vector<int32_t>{0}));         // no unk token: unknown characters vanish
  EXPECT_EQ(t->decode(std::vector<int32_t>{4, 2, 99}), "abc c");  // no decoder: joined with spaces
  EXPECT_EQ(t->vocab_size(), 5);
  IncrementalDetokenizer d(*t, false);
  EXPECT_EQ(d.push(4), "abc");
  EXPECT_EQ(d.push(2), " c");
  EXPECT_EQ(d.finish(), "");
}

TEST(TokenizerEncode, InvalidUtf8IsRepairedLikeFromUtf8Lossy) {
  const Tokenizer& tok = test_tokenizer();
  // Each maximal invalid subsequence becomes one U+FFFD before tokenization.
  EXPECT_EQ(tok.encode("ab\xff\xfe cd \xe2\x82"), tok.encode("ab\uFFFD\uFFFD cd \uFFFD"));
  EXPECT_EQ(tok.encode("\xf0\x80\x80 x \xed\xa0\x80"), tok.encode("\uFFFD\uFFFD\uFFFD x \uFFFD\uFFFD\uFFFD"));
  EXPECT_EQ(tok.encode("<|im_start|>\xc0\xaf<|im_end|>"), tok.encode("<|im_start|>\uFFFD\uFFFD<|im_end|>"));
}

TEST(TokenizerEncode, ParseSpecialControlsOnlySpecialTokens) {
  const Tokenizer& tok = test_tokenizer();
  const int32_t im_start = *tok.token_to_id("<|im_start|>");
  const int32_t think = *tok.token_to_id("<think>");
  EXPECT_TRUE(tok.is_special(im_start));
  EXPECT_FALSE(tok.is_special(think));  // Qwen3's <think> is an added, non-special token
  EXPECT_EQ(tok.encode("<|im_start|>"), std::vector<int32_t>{im_start});
  const auto plain = tok.encode("<|im_start|>", /*parse_special=*/false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok.decode(plain), "<|im_start|>");
  EXPECT_EQ(tok.encode("<think>", false), std::vector<int32_t>{think});
  // Qwen's post-processor is ByteLevel: nothing is added.
  EXPECT_EQ(tok.encode_with_post_processor("hi there"), tok.encode("hi there"));
}

TEST(TokenizerEncode, LongInputsDoNotExhaustTheRegexStack) {
  const Tokenizer& tok = test_tokenizer();
  for (const std::string& text :
       {std::string(1 << 20, ' '), std::string(1 << 18, 'a'),
        std::string(1 << 19, '\n') + std::string(1 << 19, '\t'), std::string(300000, '7'), [] {
          std::string s;
          for (int i = 0; i < 100000; ++i) s += "\xe4\xb8\x80";  // a 300 KB run of one CJK letter
          return s;
        }()}) {
    const auto ids = tok.encode(text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(tok.decode(ids), text);
  }
}

TEST(IncrementalDetokenizer, HoldsBackPartialUtf8) {
  const Tokenizer& tok = test_tokenizer();
  const std::string text = "a😀b";  // the emoji is several byte-level tokens in the test vocabulary
  const auto ids = tok.encode(text);
  ASSERT_GT(ids.size(), 3u);
  IncrementalDetokenizer d(tok, false);
  std::vector<std::string> chunks;
  for (int32_t id : ids) chunks.push_back(d.push(id));
  chunks.push_back(d.finish());
  std::string all;
  for (const auto& c : chunks) {
    all += c;
    EXPECT_TRUE(detail::is_valid_utf8(c));
  }
  EXPECT_EQ(all, text);
  EXPECT_EQ(chunks.front(), "a");
  // Every chunk before the one that completes the emoji is empty.
  size_t emoji_chunk = 1;
  while (emoji_chunk < chunks.size() && chunks[emoji_chunk].empty()) ++emoji_chunk;
  EXPECT_EQ(chunks[emoji_chunk].substr(0, 4), "😀");
  EXPECT_GT(emoji_chunk, 1u);
}

TEST(IncrementalDetokenizer, FinishFlushesIncompleteBytesAsReplacement) {
  const Tokenizer& tok = test_tokenizer();
  const auto ids = tok.encode("😀");
  ASSERT_GT(ids.size(), 1u);
  IncrementalDetokenizer d(tok, false);
  EXPECT_EQ(d.push(ids[0]), "");
  EXPECT_EQ(d.finish(), "\uFFFD");
  EXPECT_EQ(d.finish(), "");
  EXPECT_EQ(tok.decode(std::span(ids).first(1)), "\uFFFD");
}

TEST(IncrementalDetokenizer, InvalidBytesAreEmittedWithoutWaiting) {
  const Tokenizer& tok = test_tokenizer();
  // A lone continuation byte can never become valid: it is replaced at once, not held back.
  std::optional<int32_t> cont;
  for (int32_t id = 0; id < tok.vocab_size() && !cont; ++id) {
    if (tok.token_bytes(id) == "\x80") cont = id;
  }
  ASSERT_TRUE(cont.has_value());
  IncrementalDetokenizer d(tok, false);
  EXPECT_EQ(d.push(*cont), "\uFFFD");
  EXPECT_EQ(d.push(*tok.token_to_id("a")), "a");
}

TEST(IncrementalDetokenizer, SkipsSpecialAndUnknownIdsAndOutlivesTokenizer) {
  std::optional<IncrementalDetokenizer> d, keep;
  int32_t im_end, hello;
  {
    auto tok = Tokenizer::from_file(LOOM_FIXTURES_DIR "/tokenizer/tokenizer.json");
    ASSERT_TRUE(tok.ok());
    im_end = *tok->token_to_id("<|im_end|>");
    hello = tok->encode("hello")[0];
    d.emplace(*tok, /*skip_special_tokens=*/true);
    keep.emplace(*tok, /*skip_special_tokens=*/false);
  }  // the Tokenizer is gone; the detokenizers keep its data alive
  EXPECT_EQ(d->push(im_end), "");
  EXPECT_EQ(d->push(-1), "");
  EXPECT_EQ(d->push(1 << 30), "");
  EXPECT_EQ(d->push(hello), test_tokenizer().decode(std::vector<int32_t>{hello}));
  EXPECT_EQ(keep->push(im_end), "<|im_end|>");
}

TEST(Utf8, LossyDecodingReplacesMaximalSubparts) {
  auto lossy = [](std::string_view s) {
    std::string out;
    detail::append_utf8_lossy(out, s);
    return out;
  };
  EXPECT_EQ(lossy("abc"), "abc");
  EXPECT_EQ(lossy("\xe2\x82"), "\uFFFD");  // truncated sequence: one replacement
  EXPECT_EQ(lossy("\xe2\x82x"), "\uFFFDx");
  EXPECT_EQ(lossy("\xf0\x80\x80"), "\uFFFD\uFFFD\uFFFD");            // F0 needs 90..BF next
  EXPECT_EQ(lossy("\xed\xa0\x80"), "\uFFFD\uFFFD\uFFFD");            // surrogate
  EXPECT_EQ(lossy("\xc0\xaf"), "\uFFFD\uFFFD");                      // overlong lead
  EXPECT_EQ(lossy("\xf4\x90\x80\x80"), "\uFFFD\uFFFD\uFFFD\uFFFD");  // above U+10FFFF
  EXPECT_EQ(lossy("\xf0\x9f\x98"), "\uFFFD");
  EXPECT_EQ(lossy("\xf0\x9f\x98\x80"), "😀");
  EXPECT_EQ(detail::utf8_decodable_prefix("ab\xf0\x9f\x98"), 2u);
  EXPECT_EQ(detail::utf8_decodable_prefix("ab\xf0\x9f\x98\x80"), 6u);
  EXPECT_EQ(detail::utf8_decodable_prefix("ab\xf0\x80"), 4u);  // already invalid: nothing to wait for
  EXPECT_EQ(detail::utf8_decodable_prefix("\xe2"), 0u);
  EXPECT_EQ(detail::utf8_decodable_prefix("\x80\x80"), 2u);
}

TEST(Unicode, NfcFastPathEqualsSlowPath) {
  // Every code point below U+30000 between a base letter and a combining mark, then random strings
  // of characters that interact under NFC.
  std::string s, out;
  for (char32_t cp = 0x80; cp < 0x30000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    s = "a";
    detail::append_utf8(s, cp);
    s += "\xcc\x81";  // U+0301
    detail::append_utf8(s, cp);
    const std::string want = detail::normalize_slow(detail::NormalizationForm::kNfc, s);
    const std::string got = detail::normalize(detail::NormalizationForm::kNfc, s, &out) ? out : s;
    ASSERT_EQ(got, want) << "U+" << std::hex << uint32_t(cp);
  }
  const char32_t pool[] = {'a',    'e',   'o',   'A',    ' ',    0x300,  0x301,  0x308,  0x323,   0x327,
                           0x344,  0x345, 0xE9,  0x1100, 0x1161, 0x11A8, 0xAC00, 0xAC01, 0x212B,  0xF900,
                           0x958,  0x93C, 0x915, 0xBC6,  0xBBE,  0x3099, 0x306F, 0x1E0A, 0x1D15E, 0x1D165,
                           0x4E00, 0x5E9, 0x5C1, 0x5B8,  0x0F73, 0x0F71, 0x0F72};
  std::mt19937 rng(std::random_device{}());
  for (int iter = 0; iter < 20000; ++iter) {
    s.clear();
    const int n = 1 + rng() % 12;
    for (int k = 0; k < n; ++k) detail::append_utf8(s, pool[rng() % std::size(pool)]);
    const std::string want = detail::normalize_slow(detail::NormalizationForm::kNfc, s);
    const std::string got = detail::normalize(detail::NormalizationForm::kNfc, s, &out) ? out : s;
    ASSERT_EQ(got, want) << "input bytes " << ::testing::PrintToString(s);
  }
}

TEST(Regex, OnigurumaClassesAreTranslated) {
  const std::string space = detail::onig_to_pcre2("\\s");
  EXPECT_EQ(space.front(), '[');
  EXPECT_EQ(space.find("180E"), std::string::npos);                        // U+180E is not \s in Oniguruma
  EXPECT_EQ(detail::onig_to_pcre2("[^\\s\\p{L}]").find("[^\\x{09}"), 0u);  // inlined inside a class
  EXPECT_EQ(detail::onig_to_pcre2("\\\\s"), "\\\\s");                      // an escaped backslash, then 's'
  EXPECT_EQ(detail::onig_to_pcre2("[\\S]"), "[\\S]");                      // no PCRE2 spelling: kept
  EXPECT_EQ(detail::onig_to_pcre2("[]\\s]").substr(0, 3), "[]\\");         // ']' first in a class is literal
  EXPECT_EQ(detail::onig_to_pcre2("\\h"), "[0-9a-fA-F]");

  auto matches = [](const std::string& onig, const std::string& subject) {
    auto re = detail::Regex::from_oniguruma(onig);
    LOOM_CHECK(re.ok()) << re.status().to_string();
    std::vector<std::pair<size_t, size_t>> m;
    re->find_all(subject, &m);
    std::vector<std::string> out;
    for (auto [b, e] : m) out.push_back(subject.substr(b, e - b));
    return out;
  };
  EXPECT_EQ(matches("\\s+", "a \xe1\xa0\x8e b\xe3\x80\x80"),
            (std::vector<std::string>{" ", " ", "\xe3\x80\x80"}));
  EXPECT_EQ(matches("\\w+", "x\xc2\xbd y\xe2\x85\x9e"),
            (std::vector<std::string>{"x\xc2\xbd", "y"}));  // ½ yes, ⅞ no
  // Empty matches: like Oniguruma's iterator, none glued to the end of the previous match.
  EXPECT_EQ(matches("a*", "baac"), (std::vector<std::string>{"", "aa", ""}));
}

}  // namespace
}  // namespace loom::text
