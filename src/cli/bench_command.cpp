// `loom bench`: prefill latency and decode throughput of a model folder on a device, against
// the hardware floors (ENGINEERING.md §4). Random token ids; the engine's real path (scheduler,
// paged KV, sampler). Prints a table and writes JSON.
//
//   loom bench --model DIR --device cuda --prompt-lens 128,1024,8192 --batches 1,64 --context 1024
//
// Image TTFT (--image, vision-language models): one chat prompt with one image,
// timed per repetition after a warm-up: JPEG decode, prepare_multimodal (preprocess and vision
// tower separately), and the prefill through the engine to the first token.
//
//   loom bench --model DIR --device cuda --image photo.jpg --reps 5 --tflops 756
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/engine.h"
#include "media/image.h"
#include "models/config/model_config.h"
#include "models/multimodal.h"
#include "models/qwen_vl/image_processor.h"
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
  bool enforce_eager = false;  // no CUDA graphs
  bool profile = false;        // per-op host time (with CUDA_LAUNCH_BLOCKING=1 it includes the kernels)
  std::string image;           // image TTFT mode when set
  int reps = 5;                // image TTFT mode: timed repetitions
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
  ec.cuda_graphs = !a.enforce_eager;
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

int run_image_bench(const BenchArgs& a);

int run_bench(const BenchArgs& a) {
  if (!a.image.empty()) return run_image_bench(a);
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

// ---- Image TTFT (--image) ----

// The Qwen2.5-VL chat template's rendering of one user turn with one image (the same string as
// tools/bench/hf_baseline.py's VL_PROMPT, so both sides tokenize the same prompt).
constexpr const char* kImagePrompt =
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>Describe this image.<|im_end|>\n<|im_start|>assistant\n";

// Matmul and attention FLOPs (2 per multiply-add) of Qwen2.5-VL's vision tower on one image of
// grid (t, h, w) patches: patch embed, per block qkv / proj / gated MLP, window attention over
// window_size / patch_size / merge_size merged units per side (per frame) and full attention per
// frame in fullatt_block_indexes, then the merger MLP.
double vision_tower_flops(const nlohmann::json& v, int64_t t, int64_t h, int64_t w) {
  const double C = v.value("hidden_size", 0), I = v.value("intermediate_size", 0);
  const double out = v.value("out_hidden_size", 0), depth = v.value("depth", 0);
  const int64_t P = v.value("patch_size", 14), T = v.value("temporal_patch_size", 2);
  const int64_t m = v.value("spatial_merge_size", 2), in_ch = v.value("in_channels", 3);
  const int64_t win = std::max<int64_t>(1, v.value("window_size", 112) / P / m);  // merged units per side
  std::set<int64_t> full;
  for (const auto& i : v.value("fullatt_block_indexes", nlohmann::json::array()))
    full.insert(i.get<int64_t>());
  const double N = static_cast<double>(t * h * w);
  // Sum of squared window lengths (patches) per frame.
  double win_sq = 0;
  const int64_t mh = h / m, mw = w / m;
  for (int64_t r = 0; r < mh; r += win)
    for (int64_t c = 0; c < mw; c += win) {
      const double len = static_cast<double>(std::min(win, mh - r) * std::min(win, mw - c) * m * m);
      win_sq += len * len;
    }
  const double full_sq = static_cast<double>(h * w) * static_cast<double>(h * w);
  double f = 2 * N * static_cast<double>(in_ch * T * P * P) * C;
  for (int64_t b = 0; b < static_cast<int64_t>(depth); ++b) {
    f += 2 * N * (3 * C * C + C * C + 3 * C * I);
    f += 4 * C * static_cast<double>(t) * (full.count(b) ? full_sq : win_sq);
  }
  const double M = C * m * m, merged = N / (m * m);
  f += 2 * merged * M * M + 2 * merged * M * out;
  return f;
}

struct Samples {
  std::vector<double> v;
  double median() const {
    auto s = v;
    std::sort(s.begin(), s.end());
    return s.empty() ? 0 : (s.size() % 2 ? s[s.size() / 2] : 0.5 * (s[s.size() / 2 - 1] + s[s.size() / 2]));
  }
  double min() const { return v.empty() ? 0 : *std::min_element(v.begin(), v.end()); }
};

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

int run_image_bench(const BenchArgs& a) {
  auto fail = [](const core::Status& st) {
    return std::fprintf(stderr, "loom: %s\n", st.to_string().c_str()), 1;
  };
  auto cfg = models::load_model_config(a.model);
  if (!cfg.ok()) return fail(cfg.status());
  auto tok = text::Tokenizer::from_file(a.model + "/tokenizer.json");
  if (!tok.ok()) return fail(tok.status());
  std::ifstream in(a.image, std::ios::binary);
  if (!in) return fail(core::not_found("cannot read image '" + a.image + "'"));
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (a.reps < 1) return fail(core::invalid_argument("--reps must be at least 1"));

  server::BackendOptions b;
  b.device = a.device;
  b.threads = a.threads;
  b.gpu_memory_utilization = a.gpu_memory_utilization;
  b.profile = a.profile;
  auto ops = server::make_backend(b);
  if (!ops.ok()) return fail(ops.status());
  models::LoadOptions load;
  load.num_threads = a.threads;
  auto model = models::load_causal_lm(a.model, *cfg, **ops, load);
  if (!model.ok()) return fail(model.status());
  if (!(*model)->multimodal())
    return fail(core::invalid_argument("--image needs a vision-language model; " + a.model + " is " +
                                       (*model)->text_config().model_type));
  // The engine owns the model from here on; prepare_multimodal runs on it before each
  // add_multimodal_sequence, outside the engine.
  models::CausalLM* vlm = model->get();

  const std::string prompt = kImagePrompt;
  auto decode = [&]() -> core::Expected<std::vector<models::MediaItem>> {
    LOOM_ASSIGN_OR_RETURN(media::Image img, media::decode_image(bytes));
    std::vector<models::MediaItem> items(1);
    items[0].kind = models::MediaItem::Kind::kImage;
    items[0].image = std::move(img);
    items[0].where = a.image;
    return items;
  };
  // Warm-up of decode + preprocess + vision tower; also sizes the engine for the prompt.
  auto items = decode();
  if (!items.ok()) return fail(items.status());
  const int32_t width = (*items)[0].image.width, height = (*items)[0].image.height;
  auto warm = vlm->prepare_multimodal(prompt, *tok, *items);
  if (!warm.ok()) return fail(warm.status());
  const int64_t prompt_tokens = static_cast<int64_t>(warm->token_ids.size());
  int64_t image_tokens = 0;
  for (const auto& s : warm->spans) image_tokens += s.length;

  engine::EngineConfig ec;
  ec.max_model_len = prompt_tokens + 16;
  ec.kv_cache_tokens = ec.max_model_len;
  ec.scheduler.max_num_batched_tokens = static_cast<int32_t>(std::max<int64_t>(prompt_tokens + 1, 2048));
  ec.scheduler.max_num_seqs = 8;
  ec.cuda_graphs = !a.enforce_eager;
  engine::Engine eng(std::move(*model), *tok, ec);

  auto prefill = [&](models::MultimodalPrompt mp) -> core::Status {
    auto id = eng.add_multimodal_sequence(std::make_shared<const models::MultimodalPrompt>(std::move(mp)),
                                          greedy(1));
    if (!id.ok()) return id.status();
    while (eng.has_unfinished()) {
      auto r = eng.step();
      if (!r.ok()) return r.status();
    }
    return core::Status();
  };
  if (auto st = prefill(std::move(*warm)); !st.ok()) return fail(st);

  Samples decode_ms, prepare_ms, preprocess_ms, encode_ms, prefill_ms, ttft_ms;
  for (int rep = 0; rep < a.reps; ++rep) {
    const auto t0 = Clock::now();
    auto it = decode();
    if (!it.ok()) return fail(it.status());
    const auto t1 = Clock::now();
    auto mp = vlm->prepare_multimodal(prompt, *tok, *it);
    if (!mp.ok()) return fail(mp.status());
    const auto t2 = Clock::now();
    preprocess_ms.v.push_back(mp->preprocess_ms);
    encode_ms.v.push_back(mp->encode_ms);
    if (auto st = prefill(std::move(*mp)); !st.ok()) return fail(st);
    const auto t3 = Clock::now();
    decode_ms.v.push_back(ms_between(t0, t1));
    prepare_ms.v.push_back(ms_between(t1, t2));
    prefill_ms.v.push_back(ms_between(t2, t3));
    ttft_ms.v.push_back(ms_between(t0, t3));
  }

  // Cost model: the vision tower on the processed grid, the decoder prefill over the whole prompt.
  json grid_json = nullptr;
  double vis_flops = 0;
  if (auto ic = models::qwen_vl::load_image_processor_config(a.model); ic.ok()) {
    auto hw = models::qwen_vl::smart_resize(height, width, ic->factor(), ic->min_pixels, ic->max_pixels);
    if (hw.ok()) {
      const int64_t gh = hw->first / ic->patch_size, gw = hw->second / ic->patch_size;
      grid_json = {1, gh, gw};
      vis_flops = vision_tower_flops(cfg->vision_raw, 1, gh, gw);
    }
  }
  const models::TextConfig& text = eng.model().text_config();
  const double act_bytes = core::dtype_size(eng.model().backend().activation_dtype());
  const ModelCost cost = model_cost(text, act_bytes == 4 ? 2 : act_bytes, act_bytes);
  const double P = static_cast<double>(prompt_tokens);
  // The LM head runs on the last position only (one sampled token).
  const double lm_head = static_cast<double>(text.vocab_size) * static_cast<double>(text.hidden_size);
  const double prefill_flops = 2.0 * (cost.params_per_token - lm_head) * P + 2.0 * lm_head +
                               cost.attn_flops_per_pair * P * (P + 1) / 2.0;
  auto floor_ms = [&](double flops) { return a.tflops > 0 ? flops / (a.tflops * 1e12) * 1e3 : 0.0; };
  auto frac = [&](double flops, double ms) {
    return a.tflops > 0 && ms > 0 ? std::to_string(static_cast<int>(100 * floor_ms(flops) / ms)) + "%"
                                  : std::string("-");
  };

  std::printf("image %s: %dx%d, %lld image tokens, %lld prompt tokens, %d reps (median after a warm-up)\n",
              a.image.c_str(), width, height, static_cast<long long>(image_tokens),
              static_cast<long long>(prompt_tokens), a.reps);
  std::printf("%-34s %11s %11s %11s\n", "stage", "median ms", "min ms", "floor frac");
  auto row = [&](const char* name, const Samples& s, const std::string& f) {
    std::printf("%-34s %11.2f %11.2f %11s\n", name, s.median(), s.min(), f.c_str());
  };
  row("decode_image (JPEG)", decode_ms, "-");
  row("prepare_multimodal", prepare_ms, "-");
  row("  preprocess (resize, tokens, pos)", preprocess_ms, "-");
  row("  encode (vision tower)", encode_ms, frac(vis_flops, encode_ms.median()));
  row("prefill -> first token", prefill_ms, frac(prefill_flops, prefill_ms.median()));
  row("TTFT (all of the above)", ttft_ms, frac(vis_flops + prefill_flops, ttft_ms.median()));
  std::printf("vision tower %.1f GFLOP, prefill %.1f GFLOP", vis_flops / 1e9, prefill_flops / 1e9);
  if (a.tflops > 0)
    std::printf("; floors at %g TFLOP/s: %.2f ms, %.2f ms", a.tflops, floor_ms(vis_flops),
                floor_ms(prefill_flops));
  std::printf("\n");
  if (const auto* prof = dynamic_cast<const ops::ProfilingOps*>(&eng.model().backend()))
    std::printf("%s", prof->report().c_str());

  auto stats = [](const Samples& s) {
    return json{{"median_ms", s.median()}, {"min_ms", s.min()}, {"samples_ms", s.v}};
  };
  json out = {{"mode", "image"},
              {"model", a.model},
              {"device", a.device},
              {"backend", eng.model().backend().name()},
              {"image", a.image},
              {"width", width},
              {"height", height},
              {"grid_thw", grid_json},
              {"image_tokens", image_tokens},
              {"prompt_tokens", prompt_tokens},
              {"reps", a.reps},
              {"decode_image", stats(decode_ms)},
              {"prepare_multimodal", stats(prepare_ms)},
              {"preprocess", stats(preprocess_ms)},
              {"encode", stats(encode_ms)},
              {"prefill_first_token", stats(prefill_ms)},
              {"ttft", stats(ttft_ms)},
              {"vision_tower_flops", vis_flops},
              {"prefill_flops", prefill_flops},
              {"tflops", a.tflops},
              {"vision_floor_ms", floor_ms(vis_flops)},
              {"prefill_floor_ms", floor_ms(prefill_flops)},
              {"vision_floor_fraction", a.tflops > 0 ? floor_ms(vis_flops) / encode_ms.median() : 0.0},
              {"prefill_floor_fraction", a.tflops > 0 ? floor_ms(prefill_flops) / prefill_ms.median() : 0.0}};
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
  cmd->add_flag("--enforce-eager", args->enforce_eager, "Run decode steps without CUDA graphs");
  cmd->add_flag("--profile", args->profile,
                "Per-op time of the decode steps (set CUDA_LAUNCH_BLOCKING=1 on GPUs)");
  cmd->add_option("--image", args->image,
                  "Image TTFT mode (vision-language models): time decode, preprocess, vision tower and the "
                  "prefill to the first token for one chat prompt with this image")
      ->check(CLI::ExistingFile);
  cmd->add_option("--reps", args->reps, "Image TTFT mode: timed repetitions")->capture_default_str();
  cmd->callback([args]() { set_exit_code(run_bench(*args)); });
}

}  // namespace loom::cli
