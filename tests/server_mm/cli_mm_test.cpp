// `loom generate` media flags: --allowed-local-media-path and --limit-mm-per-prompt (vLLM's forms).
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

const std::string kLoom = std::string(LOOM_BINARY_DIR) + "/loom";
const std::string kModel = std::string(LOOM_FIXTURES_DIR) + "/models/qwen2-tiny";

struct CliRun {
  int exit_code = -1;
  std::string out;  // stdout and stderr
};

CliRun run(const std::string& args) {
  CliRun r;
  const std::string cmd = kLoom + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string text_request() {
  auto path = std::filesystem::temp_directory_path() / ("loom_mm_cli_" + std::to_string(getpid()) + ".json");
  std::ofstream(path)
      << R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "temperature": 0})";
  return path.string();
}

TEST(CliMm, AcceptsBothLimitForms) {
  const std::string req = text_request();
  for (const char* flag :
       {"--limit-mm-per-prompt image=3,video=1", "--limit-mm-per-prompt '{\"image\": 2}'"}) {
    SCOPED_TRACE(flag);
    CliRun r = run("generate --model " + kModel + " --allowed-local-media-path " + LOOM_FIXTURES_DIR + " " +
                   flag + " --request " + req);
    EXPECT_EQ(r.exit_code, 0) << r.out;
    EXPECT_NE(r.out.find("chat.completion"), std::string::npos) << r.out;
  }
}

TEST(CliMm, RefusesBadFlags) {
  const std::string req = text_request();
  CliRun r = run("generate --model " + kModel + " --limit-mm-per-prompt audio=1 --request " + req);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("unknown modality 'audio'"), std::string::npos) << r.out;
  r = run("generate --model " + kModel + " --limit-mm-per-prompt image=x --request " + req);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("needs an integer count"), std::string::npos) << r.out;
  r = run("generate --model " + kModel + " --allowed-local-media-path /does/not/exist --request " + req);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("/does/not/exist"), std::string::npos) << r.out;
}

// A media part reaches a text-only model: a clear Unsupported error, not a silent text-only answer.
TEST(CliMm, MediaOnTextModelIsRefused) {
  auto path =
      std::filesystem::temp_directory_path() / ("loom_mm_cli_img_" + std::to_string(getpid()) + ".json");
  std::ofstream(path)
      << R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": "data:image/png;base64,AAAA"},)"
      << R"( {"type": "text", "text": "hi"}]}], "max_tokens": 2})";
  CliRun r = run("generate --model " + kModel + " --request " + path.string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("image_url"), std::string::npos) << r.out;
}

}  // namespace
