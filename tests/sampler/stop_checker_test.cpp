// StopChecker: stop strings across token boundaries, hold-back, token stops, min/max tokens.
#include <gtest/gtest.h>

#include <random>

#include "engine/stop_checker.h"

namespace loom::engine {
namespace {

constexpr int32_t kEos = 9;
constexpr int32_t kTok = 1;  // an ordinary token id

struct Fed {
  std::vector<std::string> chunks;  // take_stream_text() after each append
  FinishReason finish = FinishReason::kNone;
  int32_t tokens = 0;
  std::string streamed() const {
    std::string s;
    for (const auto& c : chunks) s += c;
    return s;
  }
};

// Appends (token, text) pairs until the checker finishes; stream text is taken after each.
Fed feed(StopChecker& sc, const std::vector<std::pair<int32_t, std::string>>& steps) {
  Fed r;
  for (const auto& [tok, text] : steps) {
    r.finish = sc.append(tok, text);
    ++r.tokens;
    r.chunks.push_back(sc.take_stream_text());
    if (r.finish != FinishReason::kNone) break;
  }
  return r;
}

Fed feed_texts(StopChecker& sc, const std::vector<std::string>& texts) {
  std::vector<std::pair<int32_t, std::string>> steps;
  for (const auto& t : texts) steps.emplace_back(kTok, t);
  return feed(sc, steps);
}

SamplingParams with_stop(std::vector<std::string> stop, bool include = false) {
  SamplingParams p;
  p.stop = std::move(stop);
  p.include_stop_str_in_output = include;
  return p;
}

const std::vector<int32_t> kEosIds = {kEos};

TEST(StopChecker, StopStringSplitOverThreeTokens) {
  StopChecker sc(with_stop({"STOP"}), kEosIds, 100);
  Fed r = feed_texts(sc, {"Hello S", "T", "OP world", "never seen"});
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.tokens, 3);
  EXPECT_EQ(sc.text(), "Hello ");
  EXPECT_EQ(sc.stop_string(), "STOP");
  EXPECT_FALSE(sc.stop_token().has_value());
  // "S" and then "ST" are held back; nothing is ever retracted.
  EXPECT_EQ(r.chunks, (std::vector<std::string>{"Hello ", "", ""}));
  EXPECT_EQ(r.streamed(), sc.text());
}

TEST(StopChecker, StopAtTheVeryStart) {
  StopChecker sc(with_stop({"STOP"}), kEosIds, 100);
  Fed r = feed_texts(sc, {"STOP", "x"});
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.tokens, 1);
  EXPECT_EQ(sc.text(), "");
  EXPECT_EQ(r.streamed(), "");
}

TEST(StopChecker, IncludeStopStringInOutput) {
  StopChecker sc(with_stop({"END"}, /*include=*/true), kEosIds, 100);
  Fed r = feed_texts(sc, {"foo EN", "D bar"});
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(sc.text(), "foo END");  // " bar" after the match is cut
  // Nothing is held back: the stop string will be part of the output anyway.
  EXPECT_EQ(r.chunks, (std::vector<std::string>{"foo EN", "D"}));
}

TEST(StopChecker, EarliestEndingStopWinsAmongOverlappingCandidates) {
  // Both in one token: "bc" completes first (at 'c'), though "abcd" starts earlier.
  for (auto stops : {std::vector<std::string>{"abcd", "bc"}, std::vector<std::string>{"bc", "abcd"}}) {
    StopChecker sc(with_stop(stops), kEosIds, 100);
    EXPECT_EQ(sc.append(kTok, "xabcdy"), FinishReason::kStop);
    EXPECT_EQ(sc.text(), "xa");
    EXPECT_EQ(sc.stop_string(), "bc");
  }
  StopChecker inc(with_stop({"abcd", "bc"}, true), kEosIds, 100);
  inc.append(kTok, "xabcdy");
  EXPECT_EQ(inc.text(), "xabc");
  // Same end position: list order decides.
  StopChecker tie1(with_stop({"abc", "bc"}), kEosIds, 100);
  tie1.append(kTok, "xabc");
  EXPECT_EQ(tie1.text(), "x");
  StopChecker tie2(with_stop({"bc", "abc"}), kEosIds, 100);
  tie2.append(kTok, "xabc");
  EXPECT_EQ(tie2.text(), "xa");
}

TEST(StopChecker, SelfOverlappingStopIsHeldAndFound) {
  // "aab" against a, a, a, b: the held tail slides; the match starts at the second 'a'.
  StopChecker sc(with_stop({"aab"}), kEosIds, 100);
  Fed r = feed_texts(sc, {"a", "a", "a", "b"});
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.chunks, (std::vector<std::string>{"", "", "a", ""}));
  EXPECT_EQ(sc.text(), "a");
}

TEST(StopChecker, HoldBackReleasesTextThatCannotBecomeAStop) {
  SamplingParams p = with_stop({"</s>", "\n\n"});
  p.max_tokens = 3;
  StopChecker sc(p, kEosIds, 100);
  Fed r = feed_texts(sc, {"a<", "/x\n", "y"});
  EXPECT_EQ(r.chunks[0], "a");    // "<" might start "</s>"
  EXPECT_EQ(r.chunks[1], "</x");  // "</x" cannot; "\n" might start "\n\n"
  EXPECT_EQ(r.chunks[2], "\ny");  // finished by length: everything is released
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(sc.text(), "a</x\ny");
}

TEST(StopChecker, MultiByteStopStringsHoldWholeCharacters) {
  StopChecker sc(with_stop({"世界"}), kEosIds, 100);
  Fed r = feed_texts(sc, {"你好世", "界!"});
  EXPECT_EQ(r.chunks[0], "你好");
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(sc.text(), "你好");
}

TEST(StopChecker, EosStopIdsIgnoreEos) {
  SamplingParams p;
  p.stop_token_ids = {7};
  {
    StopChecker sc(p, kEosIds, 100);
    Fed r = feed(sc, {{kTok, "a"}, {kEos, "<eos>"}});
    EXPECT_EQ(r.finish, FinishReason::kStop);
    EXPECT_EQ(sc.text(), "a");  // the stop token's text is not output
    EXPECT_EQ(sc.stop_token(), kEos);
    EXPECT_TRUE(sc.stopped_on_eos());
  }
  {
    StopChecker sc(p, kEosIds, 100);
    Fed r = feed(sc, {{kTok, "a"}, {7, "<7>"}});
    EXPECT_EQ(r.finish, FinishReason::kStop);
    EXPECT_EQ(sc.text(), "a");
    EXPECT_EQ(sc.stop_token(), 7);
    EXPECT_FALSE(sc.stopped_on_eos());
  }
  {
    SamplingParams inc = p;
    inc.include_stop_str_in_output = true;
    StopChecker sc(inc, kEosIds, 100);
    feed(sc, {{kTok, "a"}, {7, "<7>"}});
    EXPECT_EQ(sc.text(), "a<7>");
  }
  {
    SamplingParams ign = p;
    ign.ignore_eos = true;
    ign.max_tokens = 3;
    StopChecker sc(ign, kEosIds, 100);
    Fed r = feed(sc, {{kEos, ""}, {kEos, ""}, {kTok, "z"}});
    EXPECT_EQ(r.finish, FinishReason::kLength);  // eos ignored ...
    EXPECT_EQ(r.tokens, 3);
    StopChecker sc2(ign, kEosIds, 100);
    EXPECT_EQ(feed(sc2, {{kEos, ""}, {7, ""}}).finish, FinishReason::kStop);  // ... stop_token_ids are not
  }
}

TEST(StopChecker, MinTokensDefersEveryStop) {
  SamplingParams p = with_stop({"abc"});
  p.min_tokens = 2;
  StopChecker sc(p, kEosIds, 100);
  // Token 1 (eos) and token 2 (completing "abc") are within min_tokens: no stop, text kept.
  Fed r = feed(sc, {{kEos, ""}, {kTok, "abc"}, {kTok, "d"}, {kEos, ""}});
  EXPECT_EQ(r.finish, FinishReason::kStop);
  EXPECT_EQ(r.tokens, 4);
  EXPECT_EQ(sc.text(), "abcd");
  EXPECT_TRUE(sc.stopped_on_eos());

  // A stop string may begin in protected text and end after it (as in vLLM).
  SamplingParams q = with_stop({"abc"});
  q.min_tokens = 1;
  StopChecker sc2(q, kEosIds, 100);
  Fed r2 = feed_texts(sc2, {"ab", "c"});
  EXPECT_EQ(r2.finish, FinishReason::kStop);
  EXPECT_EQ(r2.tokens, 2);
  EXPECT_EQ(sc2.text(), "");
}

TEST(StopChecker, MaxTokensAndContextLimit) {
  SamplingParams p;
  p.max_tokens = 3;
  StopChecker sc(p, kEosIds, 100);
  Fed r = feed_texts(sc, {"a", "b", "c", "d"});
  EXPECT_EQ(r.finish, FinishReason::kLength);
  EXPECT_EQ(r.tokens, 3);
  EXPECT_EQ(sc.text(), "abc");
  EXPECT_EQ(finish_reason_name(r.finish), "length");

  StopChecker ctx(p, kEosIds, /*max_new_tokens=*/2);  // the context window is tighter
  EXPECT_EQ(ctx.max_tokens(), 2);
  EXPECT_EQ(feed_texts(ctx, {"a", "b", "c"}).tokens, 2);

  SamplingParams unlimited;  // max_tokens -1: until the context limit
  StopChecker un(unlimited, kEosIds, 5);
  EXPECT_EQ(un.max_tokens(), 5);
  EXPECT_EQ(feed_texts(un, std::vector<std::string>(10, "x")).tokens, 5);

  // A stop on the last allowed token is reported as stop, not length.
  p.max_tokens = 2;
  StopChecker last(p, kEosIds, 100);
  EXPECT_EQ(feed(last, {{kTok, "a"}, {kEos, ""}}).finish, FinishReason::kStop);
  SamplingParams s = with_stop({"b"});
  s.max_tokens = 2;
  StopChecker last_str(s, kEosIds, 100);
  EXPECT_EQ(feed_texts(last_str, {"a", "b"}).finish, FinishReason::kStop);
  EXPECT_EQ(finish_reason_name(FinishReason::kStop), "stop");
}

// Reference: check after every character; the first position where some stop string ends
// decides (ties: list order). Returns the expected output text.
std::string reference_cut(const std::string& full, const std::vector<std::string>& stops, bool include,
                          bool* stopped) {
  for (size_t end = 1; end <= full.size(); ++end) {
    for (const std::string& s : stops) {
      if (s.size() <= end && full.compare(end - s.size(), s.size(), s) == 0) {
        *stopped = true;
        return full.substr(0, include ? end : end - s.size());
      }
    }
  }
  *stopped = false;
  return full;
}

TEST(StopChecker, RandomTextsMatchCharacterByCharacterReferenceAndNeverRetract) {
  std::mt19937 gen(std::random_device{}());
  auto rand_str = [&](int min_len, int max_len) {
    std::string s(std::uniform_int_distribution<int>(min_len, max_len)(gen), 'a');
    for (char& c : s) c = "abc"[std::uniform_int_distribution<int>(0, 2)(gen)];
    return s;
  };
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> stops;
    const int n_stops = std::uniform_int_distribution<int>(1, 3)(gen);
    for (int i = 0; i < n_stops; ++i) stops.push_back(rand_str(1, 4));
    const bool include = trial % 2 == 1;
    std::vector<std::string> tokens;
    std::string full;
    for (int i = 0; i < 12; ++i) {
      tokens.push_back(rand_str(0, 3));
      full += tokens.back();
    }
    bool stopped = false;
    const std::string want = reference_cut(full, stops, include, &stopped);

    StopChecker sc(with_stop(stops, include), kEosIds, 100);
    Fed r = feed_texts(sc, tokens);
    SCOPED_TRACE("full=" + full + " stops[0]=" + stops[0] + (include ? " include" : ""));
    EXPECT_EQ(r.finish, stopped ? FinishReason::kStop : FinishReason::kNone);
    EXPECT_EQ(sc.text(), want);
    // What was streamed is always a prefix of the final text (never retracted) ...
    EXPECT_EQ(want.compare(0, r.streamed().size(), r.streamed()), 0) << r.streamed();
    // ... and a finished sequence has streamed all of it.
    if (stopped) {
      EXPECT_EQ(r.streamed(), want);
    }
  }
}

TEST(StopCheckerDeathTest, AppendAfterFinishIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  SamplingParams p;
  p.max_tokens = 1;
  StopChecker sc(p, kEosIds, 10);
  sc.append(kTok, "a");
  EXPECT_DEATH(sc.append(kTok, "b"), "append after the sequence finished");
}

}  // namespace
}  // namespace loom::engine
