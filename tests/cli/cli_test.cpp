// Drives the real `loom` binary: OpenAI request in, chat.completion JSON out; vLLM's
// return_token_ids / return_tokens_as_token_ids; SSE streaming; clear errors.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

using nlohmann::json;

const std::string kLoom = std::string(LOOM_BINARY_DIR) + "/loom";
const std::string kModel = std::string(LOOM_FIXTURES_DIR) + "/models/qwen2-tiny";

struct CliRun {
  int exit_code = -1;
  std::string out;
};

CliRun run(const std::string& args) {
  CliRun r;
  std::string cmd = kLoom + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string write_request(const std::string& name, const std::string& body) {
  auto path = std::filesystem::temp_directory_path() / ("loom_cli_" + std::to_string(getpid()) + "_" + name);
  std::ofstream(path) << body;
  return path.string();
}

json golden_case(const std::string& name) {
  std::ifstream in(std::string(LOOM_FIXTURES_DIR) + "/goldens/qwen2-tiny/cases.json");
  json all = json::parse(in);
  for (const auto& c : all["cases"])
    if (c["name"] == name) return c;
  ADD_FAILURE() << "no golden case " << name;
  return {};
}

TEST(Cli, ChatCompletionMatchesTheGolden) {
  const json c = golden_case("hello");
  json req = {{"model", "tiny"},         {"messages", c["messages"]},
              {"temperature", 0},        {"max_tokens", c["max_tokens"]},
              {"logprobs", true},        {"top_logprobs", 3},
              {"return_token_ids", true}};
  CliRun r = run("generate --model " + kModel + " --request " + write_request("ok.json", req.dump()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  json resp = json::parse(r.out);
  EXPECT_EQ(resp["object"], "chat.completion");
  EXPECT_EQ(resp["model"], "tiny");
  EXPECT_EQ(resp["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(resp["prompt_token_ids"], c["prompt_ids"]);
  const json& choice = resp["choices"][0];
  EXPECT_EQ(choice["token_ids"], c["output_ids"]);
  EXPECT_EQ(choice["message"]["role"], "assistant");
  EXPECT_EQ(choice["message"]["content"], c["output_text"]);
  const size_t n = c["output_ids"].size();
  EXPECT_EQ(choice["finish_reason"], n < c["max_tokens"].get<size_t>() ? "stop" : "length");
  ASSERT_EQ(choice["logprobs"]["content"].size(), n);
  const json& first = choice["logprobs"]["content"][0];
  EXPECT_NEAR(first["logprob"].get<double>(), c["steps"][0]["logprob"].get<double>(), 1e-4);
  EXPECT_EQ(first["top_logprobs"].size(), 3u);
  EXPECT_TRUE(first["bytes"].is_array());
  EXPECT_EQ(resp["usage"]["prompt_tokens"], c["prompt_ids"].size());
  EXPECT_EQ(resp["usage"]["completion_tokens"], n);
  EXPECT_EQ(resp["usage"]["total_tokens"], c["prompt_ids"].size() + n);
}

TEST(Cli, TokensAsTokenIds) {
  json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
              {"temperature", 0},
              {"max_tokens", 3},
              {"logprobs", true},
              {"top_logprobs", 2},
              {"return_tokens_as_token_ids", true},
              {"return_token_ids", true}};
  CliRun r = run("generate --model " + kModel + " --request " + write_request("ids.json", req.dump()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  json resp = json::parse(r.out);
  const json& lp = resp["choices"][0]["logprobs"]["content"];
  ASSERT_FALSE(lp.empty());
  for (size_t i = 0; i < lp.size(); ++i) {
    EXPECT_EQ(lp[i]["token"], "token_id:" + std::to_string(resp["choices"][0]["token_ids"][i].get<int>()));
    EXPECT_EQ(lp[i]["top_logprobs"][0]["token"].get<std::string>().rfind("token_id:", 0), 0u);
  }
}

TEST(Cli, StreamsServerSentEvents) {
  json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
              {"temperature", 0},
              {"max_tokens", 4},
              {"stream", true},
              {"stream_options", {{"include_usage", true}}}};
  CliRun r = run("generate --model " + kModel + " --request " + write_request("sse.json", req.dump()));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::istringstream in(r.out);
  std::string line, text;
  int chunks = 0;
  bool done = false, usage = false;
  std::string finish;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    ASSERT_EQ(line.rfind("data: ", 0), 0u) << line;
    std::string payload = line.substr(6);
    if (payload == "[DONE]") {
      done = true;
      continue;
    }
    json j = json::parse(payload);
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    if (j.contains("usage")) {
      usage = true;
      continue;
    }
    ++chunks;
    text += j["choices"][0]["delta"].value("content", "");
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_TRUE(done);
  EXPECT_TRUE(usage);
  EXPECT_GE(chunks, 2);
  EXPECT_FALSE(finish.empty());
  // Same text as the non-streaming call.
  req.erase("stream");
  req.erase("stream_options");
  CliRun plain = run("generate --model " + kModel + " --request " + write_request("plain.json", req.dump()));
  ASSERT_EQ(plain.exit_code, 0);
  EXPECT_EQ(json::parse(plain.out)["choices"][0]["message"]["content"], text);
}

TEST(Cli, BadRequestsGiveClearErrors) {
  struct Case {
    const char* body;
    const char* needle;
  };
  const Case cases[] = {
      {"{not json", "not valid JSON"},
      {R"({"messages": []})", "'messages' must not be empty"},
      {R"({"messages": [{"role": "wizard", "content": "x"}]})", "messages[0].role"},
      {R"({"messages": [{"role": "user", "content": "x"}], "temperature": "hot"})", "temperature"},
      {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 100000})", "context"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
       "text only"},
  };
  for (const auto& c : cases) {
    CliRun r = run("generate --model " + kModel + " --request " + write_request("bad.json", c.body));
    EXPECT_EQ(r.exit_code, 1) << c.body;
    json resp = json::parse(r.out, nullptr, false);
    ASSERT_FALSE(resp.is_discarded()) << r.out;
    ASSERT_TRUE(resp.contains("error")) << r.out;
    EXPECT_NE(resp["error"]["message"].get<std::string>().find(c.needle), std::string::npos)
        << resp["error"]["message"] << " lacks " << c.needle;
    EXPECT_EQ(resp["error"]["code"], 400);
  }
}

TEST(Cli, PromptModeStreamsText) {
  CliRun r = run("generate --model " + kModel + " --prompt 'Hello' --max-tokens 5 --temperature 0");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_FALSE(r.out.empty());
  CliRun missing = run("generate --model /nonexistent --prompt x");
  EXPECT_NE(missing.exit_code, 0);
  CliRun help = run("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("generate"), std::string::npos);
}

}  // namespace
