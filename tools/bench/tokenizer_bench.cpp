// Tokenizer encode throughput, single thread, one encode() per document.
//
//   tokenizer_bench --tokenizer tokenizer.json --corpus docs.jsonl [--passes 5] [--json out.json]
//     docs.jsonl: one {"text": ...} per line (tools/reference/tokenizer_goldens.py --bench-out makes one).
//     Prints load time, the first (cold-cache) pass and the best of the following warm passes in MB/s.
//   tokenizer_bench --tokenizer tokenizer.json --verify goldens.json
//     Checks encode / encode(parse_special=false) / decode / decode(skip) / the incremental
//     detokenizer against goldens written by tools/reference/tokenizer_goldens.py for the same
//     tokenizer.json (e.g. the real Qwen3 vocabulary, for local checks). Exit status 1 on mismatch.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace {

using loom::text::IncrementalDetokenizer;
using loom::text::Tokenizer;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU time of this process: on a shared machine it is less disturbed by other load than wall time.
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::cerr << "cannot read " << path << "\n";
    std::exit(2);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_jsonl(const std::string& path) {
  std::vector<std::string> docs;
  std::istringstream in(read_file(path));
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) docs.push_back(json::parse(line)["text"].get<std::string>());
  }
  return docs;
}

int verify(const Tokenizer& tok, const std::string& goldens_path) {
  const json g = json::parse(read_file(goldens_path));
  int failures = 0;
  size_t ids_checked = 0;
  for (const json& c : g["cases"]) {
    const std::string text = c["text"];
    const auto want = c["ids"].get<std::vector<int32_t>>();
    const auto want_plain =
        c.contains("ids_no_special") ? c["ids_no_special"].get<std::vector<int32_t>>() : want;
    const std::string decoded = c.contains("decoded") ? c["decoded"].get<std::string>() : text;
    const std::string skipped =
        c.contains("decoded_skip_special") ? c["decoded_skip_special"].get<std::string>() : decoded;
    std::vector<std::string> problems;
    const auto got = tok.encode(text);
    if (got != want) problems.push_back("encode");
    if (tok.encode(text, false) != want_plain) problems.push_back("encode(parse_special=false)");
    if (tok.decode(want) != decoded) problems.push_back("decode");
    if (tok.decode(want, true) != skipped) problems.push_back("decode(skip_special_tokens)");
    IncrementalDetokenizer detok(tok, false);
    std::string streamed;
    for (int32_t id : want) streamed += detok.push(id);
    streamed += detok.finish();
    if (streamed != decoded) problems.push_back("incremental detokenizer");
    ids_checked += want.size();
    if (!problems.empty()) {
      ++failures;
      std::cerr << "MISMATCH " << c["name"].get<std::string>() << ":";
      for (const auto& p : problems) std::cerr << " " << p;
      size_t i = 0;
      while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
      if (got != want) std::cerr << " (first id difference at " << i << ")";
      std::cerr << "\n";
    }
  }
  for (const json& c : g["decode_cases"]) {
    const auto ids = c["ids"].get<std::vector<int32_t>>();
    if (tok.decode(ids) != c["decoded"].get<std::string>() ||
        tok.decode(ids, true) != c["decoded_skip_special"].get<std::string>()) {
      ++failures;
      std::cerr << "MISMATCH decode of " << c["ids"].dump() << "\n";
    }
  }
  std::printf("verified %zu documents (%zu ids) and %zu decode cases: %d mismatches\n", g["cases"].size(),
              ids_checked, g["decode_cases"].size(), failures);
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string tokenizer_path, corpus_path, verify_path, json_out;
  int passes = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--tokenizer") {
      tokenizer_path = next();
    } else if (a == "--corpus") {
      corpus_path = next();
    } else if (a == "--verify") {
      verify_path = next();
    } else if (a == "--passes") {
      passes = std::stoi(next());
    } else if (a == "--json") {
      json_out = next();
    } else {
      std::cerr << "usage: tokenizer_bench --tokenizer tokenizer.json (--corpus docs.jsonl [--passes N] "
                   "[--json out.json] | --verify goldens.json)\n";
      return 2;
    }
  }
  if (tokenizer_path.empty() || (corpus_path.empty() == verify_path.empty())) {
    std::cerr << "need --tokenizer and one of --corpus / --verify\n";
    return 2;
  }

  auto t0 = Clock::now();
  auto tok = Tokenizer::from_file(tokenizer_path);
  const double load_s = seconds_since(t0);
  if (!tok.ok()) {
    std::cerr << tok.status().to_string() << "\n";
    return 1;
  }
  if (!verify_path.empty()) return verify(*tok, verify_path);

  const std::vector<std::string> docs = read_jsonl(corpus_path);
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  const double mb = bytes / 1e6;

  std::vector<double> pass_s, pass_cpu_s;
  size_t total_ids = 0;
  for (int p = 0; p < 1 + passes; ++p) {
    size_t ids = 0;
    t0 = Clock::now();
    const double c0 = cpu_seconds();
    for (const auto& d : docs) ids += tok->encode(d).size();
    pass_cpu_s.push_back(cpu_seconds() - c0);
    pass_s.push_back(seconds_since(t0));
    total_ids = ids;
  }
  const double best_warm = *std::min_element(pass_s.begin() + 1, pass_s.end());
  const double best_warm_cpu = *std::min_element(pass_cpu_s.begin() + 1, pass_cpu_s.end());

  std::printf("loom tokenizer encode, 1 thread, one encode() per document\n");
  std::printf("  tokenizer   %s (vocab %d, load %.0f ms)\n", tokenizer_path.c_str(), tok->vocab_size(),
              load_s * 1e3);
  std::printf("  corpus      %s: %zu docs, %.2f MB, %zu ids (%.2f bytes/id)\n", corpus_path.c_str(),
              docs.size(), mb, total_ids, double(bytes) / total_ids);
  std::printf("  cold pass   %8.2f MB/s wall  %8.2f MB/s cpu\n", mb / pass_s[0], mb / pass_cpu_s[0]);
  std::printf("  warm best   %8.2f MB/s wall  %8.2f MB/s cpu  (best of %d)\n", mb / best_warm,
              mb / best_warm_cpu, passes);
  if (!json_out.empty()) {
    json j = {{"tool", "tokenizer_bench"},
              {"tokenizer", tokenizer_path},
              {"corpus", corpus_path},
              {"docs", docs.size()},
              {"megabytes", mb},
              {"ids", total_ids},
              {"load_ms", load_s * 1e3},
              {"cold_mb_per_s", mb / pass_s[0]},
              {"warm_mb_per_s", mb / best_warm},
              {"cold_cpu_mb_per_s", mb / pass_cpu_s[0]},
              {"warm_cpu_mb_per_s", mb / best_warm_cpu}};
    std::ofstream(json_out) << j.dump(2) << "\n";
  }
  return 0;
}
