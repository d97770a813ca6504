// `loom bench`: prefill latency and decode throughput of a model folder on a device, against
// the hardware floors (ENGINEERING.md §4). Random token ids; the engine's real path (scheduler,
// paged KV, sampler). Prints a table and writes JSON.
//
//   loom bench --model DIR --device cuda --prompt-lens 128,1024,8192 --batches 1,64 --context 1024
#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/engine.h"
#include "models/config/model_config.h"
#include "models/registry.h"
#include "ops/profiling_ops.h"
#include "server/backend_factory.h"

namespace loom::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BenchArgs {
  std::string model;
  std::string device = "cpu";
  std::string prompt_lens = "128,1024";
  std::string batches = "1,8";
  int context = 1024;
  int decode_steps = 32;
  int threads = 0;
  double gpu_memory_utilization = 0.9;
  double bandwidth_gbs = 0;  // measured copy bandwidth for the floor (0: not reported)
  double tflops = 0;         // measured dense GEMM rate for the floor (0: not reported)
  std::string out = "loom_bench.json";
  bool profile = false;  // per-op host time (with CUDA_LAUNCH_BLOCKING=1 it includes the kernels)
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) v.push_back(std::stoi(item));
  return v;
}

// Parameters and bytes of the weights a decode step reads, from the config.
struct ModelCost {
  double weight_bytes = 0;
  double params_per_token = 0;     // matmul parameters touched per token (2 FLOPs each)
  double kv_bytes_per_token = 0;   // K+V bytes of one context token over all layers
  double attn_flops_per_pair = 0;  // FLOPs of one (query, key) pair over all layers
};

ModelCost model_cost(const models::TextConfig& t, double weight_elem_bytes, double kv_elem_bytes) {
  const double H = t.hidden_size, I = t.intermediate_size, V = t.vocab_size, L = t.num_hidden_layers;
  const double D = t.head_dim, Hq = t.num_attention_heads, Hkv = t.num_key_value_heads;
  const double per_layer = H * Hq * D + 2 * H * Hkv * D + Hq * D * H + 3 * H * I;
  ModelCost c;
  c.params_per_token = L * per_layer + V * H;
  c.weight_bytes = (L * per_layer + V * H) * weight_elem_bytes;  // lm_head read per step
  c.kv_bytes_per_token = L * 2 * Hkv * D * kv_elem_bytes;
  c.attn_flops_per_pair = L * Hq * D * 4;
  return c;
}

struct Harness {
  std::unique_ptr<ops::Ops> ops;
  std::unique_ptr<engine::Engine> engine;
  const models::TextConfig* text = nullptr;
};

core::Expected<Harness> make_harness(const BenchArgs& a, const models::ModelConfig& cfg,
                                     const text::Tokenizer& tok, int64_t max_len, int64_t kv_tokens,
                                     int32_t budget) {
  Harness h;
  server::BackendOptions b;
  b.device = a.device;
  b.threads = a.threads;
  b.gpu_memory_utilization = a.gpu_memory_utilization;
  b.profile = a.profile;
  LOOM_ASSIGN_OR_RETURN(h.ops, server::make_backend(b));
  LOOM_ASSIGN_OR_RETURN(auto model, models::load_causal_lm(a.model, cfg, *h.ops, {}));
  engine::EngineConfig ec;
  ec.max_model_len = max_len;
  ec.kv_cache_tokens = kv_tokens;
  ec.scheduler.max_num_batched_tokens = budget;
  ec.scheduler.max_num_seqs = 1024;
  h.engine = std::make_unique<engine::Engine>(std::move(model), tok, ec);
  h.text = &h.engine->model().text_config();
  return h;
}

std::vector<int32_t> random_ids(std::mt19937& rng, int n, int64_t vocab) {
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(std::min<int64_t>(vocab, 100000) - 1));
  std::vector<int32_t> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

// Tokens a decode-benchmark sequence may generate: the timed steps plus those that sequences
// finishing their prefill early decode while the others still prefill.
int decode_budget(const BenchArgs& a, int batch) {
  return a.decode_steps + 64 + batch * a.context / 512;
}

engine::SamplingParams greedy(int max_tokens) {
  engine::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

int run_bench(const BenchArgs& a) {
  auto cfg = models::load_model_config(a.model);
  if (!cfg.ok()) return std::fprintf(stderr, "loom: %s\n", cfg.status().to_string().c_str()), 1;
  auto tok = text::Tokenizer::from_file(a.model + "/tokenizer.json");
  if (!tok.ok()) return std::fprintf(stderr, "loom: %s\n", tok.status().to_string().c_str()), 1;
  const auto prompt_lens = parse_list(a.prompt_lens);
  const auto batches = parse_list(a.batches);
  int max_prompt = a.context + 1;
  for (int p : prompt_lens) max_prompt = std::max(max_prompt, p + 1);
  int max_batch = 1;
  for (int b : batches) max_batch = std::max(max_batch, b);
  const int64_t max_len = std::max<int64_t>(max_prompt + 2, a.context + decode_budget(a, max_batch) + 2);
  const int64_t kv_tokens = std::max<int64_t>(max_len, static_cast<int64_t>(max_batch) * max_len);
  auto h = make_harness(a, *cfg, *tok, max_len, kv_tokens, std::max(max_prompt, 2048));
  if (!h.ok()) return std::fprintf(stderr, "loom: %s\n", h.status().to_string().c_str()), 1;
  engine::Engine& eng = *h->engine;
  const double act_bytes = core::dtype_size(h->ops->activation_dtype());
  const ModelCost cost = model_cost(*h->text, act_bytes == 4 ? 2 : act_bytes, act_bytes);
  std::mt19937 rng(1234);
  json out = {{"model", a.model}, {"device", a.device}, {"backend", h->ops->name()}};

  auto run_to_end = [&](const std::vector<int64_t>& ids) -> bool {
    while (eng.has_unfinished()) {
      auto r = eng.step();
      if (!r.ok()) return std::fprintf(stderr, "loom: %s\n", r.status().to_string().c_str()), false;
    }
    (void)ids;
    return true;
  };

  std::printf("%-28s %12s %14s %12s\n", "case", "time", "throughput", "floor frac");
  // Prefill: one sequence of P tokens, one step (the budget covers it), then its first token.
  json pre = json::array();
  for (int P : prompt_lens) {
    double best = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      auto id = eng.add_sequence(random_ids(rng, P, h->text->vocab_size), greedy(1));
      if (!id.ok()) return std::fprintf(stderr, "loom: %s\n", id.status().to_string().c_str()), 1;
      const auto t0 = Clock::now();
      if (!run_to_end({*id})) return 1;
      best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    const double flops = 2.0 * cost.params_per_token * P + cost.attn_flops_per_pair * P * (P + 1) / 2.0;
    const double floor = a.tflops > 0 ? flops / (a.tflops * 1e12) : 0;
    std::printf("%-28s %9.2f ms %10.0f tok/s %11s\n", ("prefill " + std::to_string(P)).c_str(), best * 1e3,
                P / best,
                floor > 0 ? (std::to_string(static_cast<int>(100 * floor / best)) + "%").c_str() : "-");
    pre.push_back({{"prompt_tokens", P},
                   {"seconds", best},
                   {"tokens_per_s", P / best},
                   {"flops", flops},
                   {"floor_seconds", floor}});
  }
  out["prefill"] = pre;

  // Decode: B sequences with `context` tokens each; time decode_steps steps after the prefill.
  json dec = json::array();
  for (int B : batches) {
    std::set<int64_t> pending;
    std::vector<int64_t> ids;
    // Room for the timed steps plus the steps early sequences decode while others prefill.
    const int max_tokens = decode_budget(a, B);
    for (int b = 0; b < B; ++b) {
      auto id = eng.add_sequence(random_ids(rng, a.context, h->text->vocab_size), greedy(max_tokens));
      if (!id.ok()) return std::fprintf(stderr, "loom: %s\n", id.status().to_string().c_str()), 1;
      ids.push_back(*id);
      pending.insert(*id);
    }
    // Prefill everything (until every sequence has sampled its first token; sequences that got
    // there first keep decoding meanwhile), then time steps in which all B sequences decode.
    while (!pending.empty()) {
      auto r = eng.step();
      if (!r.ok()) return std::fprintf(stderr, "loom: %s\n", r.status().to_string().c_str()), 1;
      for (const auto& o : *r) pending.erase(o.seq_id);
    }
    auto* prof = dynamic_cast<ops::ProfilingOps*>(h->ops.get());
    if (prof != nullptr) prof->reset();
    const auto t0 = Clock::now();
    int steps = 0;
    for (; steps < a.decode_steps; ++steps) {
      auto r = eng.step();
      if (!r.ok()) return std::fprintf(stderr, "loom: %s\n", r.status().to_string().c_str()), 1;
      if (static_cast<int>(r->size()) != B)
        return std::fprintf(stderr, "loom: bench step ran %zu of %d sequences\n", r->size(), B), 1;
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    for (int64_t id : ids) eng.abort_sequence(id);
    const double per_step = secs / steps;
    const double ctx = a.context + a.decode_steps / 2.0;
    const double bytes = cost.weight_bytes + B * ctx * cost.kv_bytes_per_token;
    const double floor = a.bandwidth_gbs > 0 ? bytes / (a.bandwidth_gbs * 1e9) : 0;
    char name[64];
    std::snprintf(name, sizeof name, "decode b=%d ctx=%d", B, a.context);
    std::printf("%-28s %9.2f ms %10.0f tok/s %11s\n", name, per_step * 1e3, B / per_step,
                floor > 0 ? (std::to_string(static_cast<int>(100 * floor / per_step)) + "%").c_str() : "-");
    if (prof != nullptr) std::printf("%s", prof->report().c_str());
    dec.push_back({{"batch", B},
                   {"context", a.context},
                   {"steps", steps},
                   {"seconds_per_step", per_step},
                   {"tokens_per_s", B / per_step},
                   {"bytes_per_step", bytes},
                   {"floor_seconds", floor}});
  }
  out["decode"] = dec;
  std::ofstream(a.out) << out.dump(2) << "\n";
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd =
      app.add_subcommand("bench", "Prefill latency and decode throughput against the hardware floors");
  cmd->add_option("--model", args->model,
                  "Model folder (tools/bench/make_random_checkpoint.py makes real shapes)")
      ->required()
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--device", args->device, "cpu or cuda")->capture_default_str();
  cmd->add_option("--prompt-lens", args->prompt_lens, "Prefill lengths, comma-separated")
      ->capture_default_str();
  cmd->add_option("--batches", args->batches, "Decode batch sizes, comma-separated")->capture_default_str();
  cmd->add_option("--context", args->context, "Context tokens per sequence for decode")
      ->capture_default_str();
  cmd->add_option("--decode-steps", args->decode_steps, "Timed decode steps")->capture_default_str();
  cmd->add_option("--threads", args->threads, "CPU threads (0: all)");
  cmd->add_option("--gpu-memory-utilization", args->gpu_memory_utilization, "Fraction of GPU memory to use");
  cmd->add_option("--bandwidth-gbs", args->bandwidth_gbs,
                  "Measured memory bandwidth (GB/s) for the decode floor");
  cmd->add_option("--tflops", args->tflops, "Measured dense matmul rate (TFLOP/s) for the prefill floor");
  cmd->add_option("--out", args->out, "JSON output")->capture_default_str();
  cmd->add_flag("--profile", args->profile,
                "Per-op time of the decode steps (set CUDA_LAUNCH_BLOCKING=1 on GPUs)");
  cmd->callback([args]() { set_exit_code(run_bench(*args)); });
}

}  // namespace loom::cli
