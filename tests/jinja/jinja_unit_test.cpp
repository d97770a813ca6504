// Unit tests of the Jinja interpreter pieces: error locations and statuses, Python value semantics
// (repr, float formatting, equality, hashing), json.dumps, case mapping, safety limits and concurrent
// rendering. Expected strings are Python's/jinja2's outputs (checked with CPython 3.11 + jinja2 3.1.6);
// the differential corpora are in jinja_snippets_test.cpp and chat_template_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "text/jinja/error.h"
#include "text/jinja/json_dump.h"
#include "text/jinja/lexer.h"
#include "text/jinja/template.h"
#include "text/jinja/unicode.h"
#include "text/jinja/value.h"

namespace loom::text::jinja {
namespace {

core::Expected<std::string> render(const std::string& source, const RenderVars& vars = {}) {
  auto t = Template::parse(source);
  if (!t.ok()) return t.status();
  return t->render(vars);
}

std::string render_ok(const std::string& source, const RenderVars& vars = {}) {
  auto out = render(source, vars);
  EXPECT_TRUE(out.ok()) << source << " -> " << out.status().to_string();
  return out.ok() ? *out : std::string();
}

// ---- errors ----

TEST(JinjaErrors, SyntaxErrorsCarryLineAndColumn) {
  auto t = Template::parse("line one\n  {{ x + }}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.status().message(),
            "template syntax error at line 2, column 10: unexpected 'end of print statement'");

  auto unclosed = Template::parse("{% for m in messages %}\n{{ m }}\n");
  ASSERT_FALSE(unclosed.ok());
  EXPECT_NE(unclosed.status().message().find("'endfor' or 'else'"), std::string::npos)
      << unclosed.status().message();
  EXPECT_NE(unclosed.status().message().find("innermost block that needs to be closed is 'for'"),
            std::string::npos);

  auto wrong_end = Template::parse("{% if a %}\n\n{% endfor %}");
  ASSERT_FALSE(wrong_end.ok());
  EXPECT_NE(wrong_end.status().message().find("line 3"), std::string::npos) << wrong_end.status().message();
  EXPECT_NE(wrong_end.status().message().find("Encountered unknown tag 'endfor'"), std::string::npos);

  auto bad_char = Template::parse("{{ a ? b }}");
  ASSERT_FALSE(bad_char.ok());
  EXPECT_EQ(bad_char.status().message(),
            "template syntax error at line 1, column 6: unexpected char '?' at 5");

  auto filter = Template::parse("x\n\n{{ y|no_such_filter }}");
  ASSERT_FALSE(filter.ok());
  EXPECT_EQ(filter.status().message(), "template syntax error at line 3: No filter named 'no_such_filter'.");
}

TEST(JinjaErrors, RuntimeErrorsCarryTheLineAndMessage) {
  auto out = render("a\nb\n{{ 1 // 0 }}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), core::StatusCode::kInvalidArgument);
  EXPECT_EQ(out.status().message(),
            "template error at line 3: TypeError: integer division or modulo by zero");

  out = render("{% if true %}\n  {{ raise_exception('Conversation roles must alternate!') }}\n{% endif %}");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "template error at line 2: Conversation roles must alternate!");

  out = render("{{ messages[0].content.strip() }}",
               {{"messages", Value::from_json(nlohmann::ordered_json::parse(R"([{"role": "user"}])"))}});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "template error at line 1: UndefinedError: 'dict object' has no attribute 'content'");

  out = render("{% set ns = namespace() %}{% set ns._x = 1 %}");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("SecurityError"), std::string::npos) << out.status().message();

  out = render("{{ [].append(1) }}");
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("access to attribute 'append' of 'list' object is unsafe"),
            std::string::npos)
      << out.status().message();
}

TEST(JinjaErrors, SafetyLimitsAreResourceExhausted) {
  auto deep = render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  ASSERT_FALSE(deep.ok());
  EXPECT_EQ(deep.status().code(), core::StatusCode::kResourceExhausted);
  EXPECT_NE(deep.status().message().find("recursion"), std::string::npos);

  auto t = Template::parse("{% for i in range(100) %}{{ s }}{% endfor %}");
  ASSERT_TRUE(t.ok());
  RenderOptions opts;
  opts.max_output_bytes = 1000;
  auto big = t->render({{"s", Value::string(std::string(100, 'x'))}}, opts);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().code(), core::StatusCode::kResourceExhausted);

  auto huge = render("{{ 'x' * 100000000 }}");
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), core::StatusCode::kResourceExhausted);

  auto range = render("{{ range(200000)|length }}");
  ASSERT_FALSE(range.ok());
  EXPECT_NE(range.status().message().find("MAX_RANGE"), std::string::npos);
}

// ---- lexer ----

TEST(JinjaLexer, TokensAndWhitespaceControl) {
  auto tokens = tokenize("a  {{- x|upper }}\n  {% if y -%}\n b{# c #}\n");
  std::vector<std::string> kinds;
  for (const auto& t : tokens) {
    switch (t.type) {
      case TokenType::kData: kinds.push_back("data:" + t.value); break;
      case TokenType::kName: kinds.push_back("name:" + t.value); break;
      case TokenType::kOperator: kinds.push_back("op:" + t.value); break;
      default: kinds.push_back(describe_token(t)); break;
    }
  }
  // "{{-" strips the spaces before it; lstrip_blocks removes the indentation of "{%"; "-%}" eats the
  // newline and the space after it; trim_blocks eats the newline after "#}" and the final newline is
  // dropped with the template's trailing newline.
  std::vector<std::string> want = {"data:a",
                                   "begin of print statement",
                                   "name:x",
                                   "op:|",
                                   "name:upper",
                                   "end of print statement",
                                   "data:\n",
                                   "begin of statement block",
                                   "name:if",
                                   "name:y",
                                   "end of statement block",
                                   "data:b",
                                   "end of template"};
  EXPECT_EQ(kinds, want);
  EXPECT_EQ(tokens[1].line, 1);
  EXPECT_EQ(tokens[7].line, 2);
  EXPECT_EQ(tokens[7].column, 3);
}

TEST(JinjaLexer, StringLiteralEscapesFollowPython) {
  auto tokens = tokenize(R"({{ 'a\tb\n\x41\u00e9\U0001F600\101\q\\' }})");
  ASSERT_EQ(tokens[1].type, TokenType::kString);
  EXPECT_EQ(tokens[1].value,
            "a\tb\nA\xC3\xA9\xF0\x9F\x98\x80"
            "A\\q\\");
}

// ---- values ----

TEST(JinjaValue, FloatReprMatchesPython) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {123456789012345678.0, "1.2345678901234568e+17"},
      {1e-4, "0.0001"},
      {1e-5, "1e-05"},
      {-2.5, "-2.5"},
      {-0.0, "-0.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e308, "1.7976931348623157e+308"},
      {std::numeric_limits<double>::infinity(), "inf"},
      {-std::numeric_limits<double>::infinity(), "-inf"},
      {std::nan(""), "nan"},
  };
  for (const auto& [v, want] : cases) EXPECT_EQ(float_repr(v), want) << v;
}

TEST(JinjaValue, ReprAndStrFollowPython) {
  EXPECT_EQ(str_repr("it's"), "\"it's\"");
  EXPECT_EQ(str_repr("say \"hi\" it's"), "'say \"hi\" it\\'s'");
  EXPECT_EQ(str_repr("tab\tnl\n\x01\x7f\\"), "'tab\\tnl\\n\\x01\\x7f\\\\'");
  EXPECT_EQ(str_repr("\xC3\xA9\xE2\x80\x8B\xF0\x9F\x98\x80"), "'\xC3\xA9\\u200b\xF0\x9F\x98\x80'");
  auto v = Value::from_json(nlohmann::ordered_json::parse(R"({"b": [1, 2.0, null, true, "x"], "a": {}})"));
  EXPECT_EQ(to_str(v), "{'b': [1, 2.0, None, True, 'x'], 'a': {}}");
  EXPECT_EQ(to_str(Value::tuple({Value::integer(1)})), "(1,)");
  EXPECT_EQ(to_str(Value()), "");
  EXPECT_EQ(repr(Value()), "Undefined");
}

TEST(JinjaValue, EqualityOrderingAndHashing) {
  EXPECT_TRUE(equals(Value::integer(1), Value::number(1.0)));
  EXPECT_TRUE(equals(Value::integer(1), Value::boolean(true)));
  EXPECT_FALSE(equals(Value::list({Value::integer(1)}), Value::tuple({Value::integer(1)})));
  EXPECT_TRUE(equals(Value(), Value::undefined("x")));
  EXPECT_FALSE(equals(Value(), Value::none()));
  EXPECT_EQ(hash_key(Value::integer(1)), hash_key(Value::number(1.0)));
  EXPECT_EQ(hash_key(Value::integer(1)), hash_key(Value::boolean(true)));
  EXPECT_NE(hash_key(Value::string("1")), hash_key(Value::integer(1)));
  EXPECT_THROW(hash_key(Value::list({})), TemplateError);
  EXPECT_LT(compare(Value::string("a"), Value::string("b"), "<"), 0);
  EXPECT_LT(compare(Value::list({Value::integer(1), Value::integer(2)}),
                    Value::list({Value::integer(1), Value::integer(3)}), "<"),
            0);
  EXPECT_THROW(compare(Value::string("a"), Value::integer(1), "<"), TemplateError);
}

TEST(JinjaValue, JsonDumpsMatchesPython) {
  auto v = Value::from_json(nlohmann::ordered_json::parse(
      R"({"name": "f", "args": {"b": [1, 2.5, null, true], "s": "\u00e9\"\\\n\u0001"}, "e": {}, "l": []})"));
  JsonDumpOptions plain;
  EXPECT_EQ(json_dumps(v, plain),
            R"({"name": "f", "args": {"b": [1, 2.5, null, true], "s": "é\"\\\n\u0001"}, "e": {}, "l": []})");
  JsonDumpOptions indented;
  indented.indent = "  ";
  EXPECT_EQ(json_dumps(Value::from_json(nlohmann::ordered_json::parse(R"({"a": [1, {}], "b": {"c": null}})")),
                       indented),
            "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": {\n    \"c\": null\n  }\n}");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  ascii.sort_keys = true;
  EXPECT_EQ(
      json_dumps(Value::from_json(nlohmann::ordered_json::parse(R"({"z": "\u00fc\ud83d\ude00", "a": 1})")),
                 ascii),
      R"({"a": 1, "z": "\u00fc\ud83d\ude00"})");
  EXPECT_EQ(json_dumps(Value::number(std::numeric_limits<double>::infinity()), plain), "Infinity");
  EXPECT_THROW(json_dumps(Value(), plain), TemplateError);
}

TEST(JinjaUnicode, FullCaseMappingAndWhitespace) {
  EXPECT_EQ(unicode::upper("stra\xC3\x9F"
                           "e \xEF\xAC\x81"),
            "STRASSE FI");                                                              // ß, ﬁ
  EXPECT_EQ(unicode::lower("\xC4\xB0"), "i\xCC\x87");                                   // İ
  EXPECT_EQ(unicode::lower("\xCE\x9F\xCE\xA3 \xCE\xA3"), "\xCE\xBF\xCF\x82 \xCF\x83");  // ΟΣ Σ -> ος σ
  EXPECT_TRUE(unicode::is_space(0x3000));
  EXPECT_TRUE(unicode::is_space(0x1C));
  EXPECT_FALSE(unicode::is_space(0x200B));
  EXPECT_EQ(unicode::length("h\xC3\xA9llo \xF0\x9F\x98\x80"), 7u);
  // Invalid UTF-8 survives a decode/encode round trip byte for byte.
  std::string bad = "a\xFF\xC3(b";
  EXPECT_EQ(unicode::to_utf8(unicode::to_u32(bad)), bad);
}

// ---- rendering ----

TEST(JinjaRender, MessagesLoopWithNamespace) {
  auto messages = Value::from_json(nlohmann::ordered_json::parse(
      R"([{"role": "system", "content": "S"}, {"role": "user", "content": "U1"},
          {"role": "assistant", "content": "A"}, {"role": "user", "content": "U2"}])"));
  const std::string src =
      "{%- set ns = namespace(last_user=-1) -%}\n"
      "{%- for m in messages -%}\n"
      "  {%- if m.role == 'user' %}{% set ns.last_user = loop.index0 %}{% endif -%}\n"
      "{%- endfor -%}\n"
      "{%- for m in messages[1:] -%}\n"
      "<{{ m['role'] }}{{ '*' if loop.index == ns.last_user else '' }}>{{ m.content | trim }}\n"
      "{%- endfor %}";
  EXPECT_EQ(render_ok(src, {{"messages", messages}}), "<user>U1<assistant>A<user*>U2");
}

TEST(JinjaRender, ParsedTemplateRendersConcurrently) {
  auto t = Template::parse(
      "{% macro item(i) %}[{{ i }}:{{ (i * 7) % 5 }}]{% endmacro %}"
      "{% for i in range(n) %}{{ item(i) }}{% if not loop.last %},{% endif %}{% endfor %}");
  ASSERT_TRUE(t.ok());
  RenderVars vars{{"n", Value::integer(200)}};
  auto expected = t->render(vars);
  ASSERT_TRUE(expected.ok());
  std::vector<std::thread> threads;
  std::vector<int> mismatches(8, 0);
  for (int k = 0; k < 8; ++k) {
    threads.emplace_back([&, k] {
      for (int r = 0; r < 50; ++r) {
        auto out = t->render(vars);
        if (!out.ok() || *out != *expected) ++mismatches[k];
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(JinjaRender, StrftimeNowClockOverride) {
  auto t = Template::parse("{{ strftime_now('%d %b %Y %H:%M:%S') }}");
  ASSERT_TRUE(t.ok());
  RenderOptions opts;
  opts.now_epoch_seconds = 1753614000;  // 2025-07-27 11:00:00 UTC
  auto out = t->render({}, opts);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, "27 Jul 2025 11:00:00");
}

}  // namespace
}  // namespace loom::text::jinja
