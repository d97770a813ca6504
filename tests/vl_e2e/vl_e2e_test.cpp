// Qwen2.5-VL and Qwen3-VL end to end on the CPU (f32) against transformers 5.24 (eager, f32):
// goldens from tools/reference/make_vl_e2e_goldens.py in tests/fixtures/vl_e2e/<model>/<case>/.
// For each case: the rendered prompt and its media -> prepare_multimodal (processor, placeholder
// expansion, tokenizer, M-RoPE positions, vision tower) -> token ids and positions equal exactly;
// one prompt forward -> decoder input embeddings, layer-0 output, final norm and last-token logits
// within f32 bounds; the engine's greedy generation (whole prompt, and chunked prefill cutting the
// image spans) -> the 8 golden tokens and per-step logprobs.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "../models/golden.h"
#include "engine/engine.h"
#include "media/image.h"
#include "media/media_source.h"
#include "media/video.h"
#include "models/checkpoint/checkpoint.h"
#include "models/config/model_config.h"
#include "models/registry.h"
#include "server/backend_factory.h"
#include "server/chat_service.h"
#include "text/tokenizer.h"

namespace loom::testing {
namespace {

using nlohmann::json;

// f32 everywhere; the differences left are summation orders (GEMM blocking, attention, norms).
constexpr double kHiddenRelL2 = 1e-4;
constexpr double kLogitsMaxAbs = 2e-3;
constexpr double kLogprobAbs = 1e-3;

std::string repo_root() {
  return std::string(LOOM_FIXTURES_DIR) + "/../..";
}

// A request URL: data: URLs as they are, paths relative to the repository root.
std::vector<uint8_t> read_bytes(const std::string& url) {
  media::MediaPolicy policy;
  policy.allowed_local_media_path = repo_root();
  auto bytes = media::load_media_bytes(url.rfind("data:", 0) == 0 ? url : repo_root() + "/" + url, policy);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? std::move(*bytes) : std::vector<uint8_t>{};
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream ss;
  ss << in.rdbuf();
  return json::parse(ss.str());
}

// The media parts of a request, in order (paths relative to the repository root).
std::vector<models::MediaItem> load_media(const json& request) {
  std::vector<models::MediaItem> items;
  for (const auto& m : request["messages"]) {
    if (!m["content"].is_array()) continue;
    for (const auto& part : m["content"]) {
      const std::string type = part["type"];
      if (type == "image_url") {
        auto bytes = read_bytes(part["image_url"]["url"].get<std::string>());
        auto img = media::decode_image(bytes);
        EXPECT_TRUE(img.ok()) << img.status().to_string();
        models::MediaItem it;
        it.kind = models::MediaItem::Kind::kImage;
        it.image = std::move(*img);
        items.push_back(std::move(it));
      } else if (type == "video_url") {
        auto bytes =
            std::make_shared<std::vector<uint8_t>>(read_bytes(part["video_url"]["url"].get<std::string>()));
        auto info = media::probe_video(*bytes);
        EXPECT_TRUE(info.ok()) << info.status().to_string();
        models::MediaItem it;
        it.kind = models::MediaItem::Kind::kVideo;
        it.video_bytes = bytes;
        it.video_info = *info;
        items.push_back(std::move(it));
      }
    }
  }
  return items;
}

struct Case {
  std::string model, name;
};

class VlE2E : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    const Case& c = GetParam();
    dir_ = fixtures_dir() + "/vl_e2e/" + c.model + "/" + c.name;
    model_dir_ = fixtures_dir() + "/models/" + c.model;
    golden_ = read_json(dir_ + "/golden.json");
    request_ = read_json(dir_ + "/request.json");
    auto t = models::Checkpoint::open(dir_ + "/golden.safetensors");
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    tensors_ = std::make_unique<models::Checkpoint>(std::move(*t));
    auto tok = text::Tokenizer::from_file(model_dir_ + "/tokenizer.json");
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    tok_ = std::make_unique<text::Tokenizer>(std::move(*tok));
  }

  std::unique_ptr<models::CausalLM> load(ops::Ops& ops) {
    auto cfg = models::load_model_config(model_dir_);
    EXPECT_TRUE(cfg.ok()) << cfg.status().to_string();
    models::LoadOptions lo;
    lo.weight_dtype = models::WeightDType::kF32;
    auto m = models::load_causal_lm(model_dir_, *cfg, ops, lo);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? std::move(*m) : nullptr;
  }

  core::Tensor golden(const std::string& name) {
    auto t = tensors_->get(name);
    EXPECT_TRUE(t.ok()) << name;
    return t.ok() ? t->to_f32() : core::Tensor();
  }

  std::string dir_, model_dir_;
  json golden_, request_;
  std::unique_ptr<models::Checkpoint> tensors_;
  std::unique_ptr<text::Tokenizer> tok_;
};

std::unique_ptr<ops::Ops> cpu_ops() {
  server::BackendOptions bo;
  bo.device = "cpu";
  auto ops = server::make_backend(bo);
  EXPECT_TRUE(ops.ok()) << ops.status().to_string();
  return std::move(*ops);
}

TEST_P(VlE2E, PromptIdsPositionsHiddenStatesAndLogits) {
  auto ops = cpu_ops();
  auto model = load(*ops);
  ASSERT_NE(model, nullptr);
  auto items = load_media(request_);
  auto mm = model->prepare_multimodal(golden_["prompt"].get<std::string>(), *tok_, items);
  ASSERT_TRUE(mm.ok()) << mm.status().to_string();
  ASSERT_EQ(mm->token_ids, golden_["input_ids"].get<std::vector<int32_t>>());
  const auto pos = golden_["position_ids"].get<std::vector<std::vector<int32_t>>>();
  std::vector<int32_t> flat;
  for (const auto& row : pos) flat.insert(flat.end(), row.begin(), row.end());
  EXPECT_EQ(mm->mrope_positions, flat);
  EXPECT_EQ(mm->rope_delta, golden_["rope_delta"].get<int64_t>());

  // One forward over the whole prompt, with dumps.
  const auto T = static_cast<int32_t>(mm->token_ids.size());
  const int32_t bs = 16, nb = (T + bs - 1) / bs;
  auto kv = model->allocate_kv(nb, bs);
  models::ForwardBatch b;
  b.token_ids = mm->token_ids;
  b.positions.assign(flat.begin(), flat.begin() + T);
  b.mrope_positions = flat;
  for (int32_t t = 0; t < T; ++t) b.slot_mapping.push_back(t);
  b.q_indptr = {0, T};
  b.kv_lens = {T};
  for (int32_t i = 0; i < nb; ++i) b.block_table.push_back(i);
  b.max_blocks_per_seq = nb;
  b.block_size = bs;
  b.logits_rows = {T - 1};
  int64_t n = 0;
  for (const auto& s : mm->spans) n += s.length;
  const int64_t H = model->text_config().hidden_size;
  b.mm_embeds = core::Tensor::empty({n, H}, core::DType::kF32);
  const size_t deep = mm->spans.empty() ? 0 : mm->spans[0].deepstack.size();
  for (size_t l = 0; l < deep; ++l)
    b.deepstack_embeds.push_back(core::Tensor::empty({n, H}, core::DType::kF32));
  int64_t r = 0;
  for (const auto& s : mm->spans) {
    for (int64_t i = 0; i < s.length; ++i, ++r) {
      b.mm_rows.push_back(static_cast<int32_t>(s.offset + i));
      std::memcpy(b.mm_embeds.data_as<float>() + r * H, s.embeds.data_as<float>() + i * H, H * 4);
      for (size_t l = 0; l < deep; ++l)
        std::memcpy(b.deepstack_embeds[l].data_as<float>() + r * H, s.deepstack[l].data_as<float>() + i * H,
                    H * 4);
    }
  }
  std::map<std::string, core::Tensor> dumps;
  models::DumpHook hook = [&](std::string_view name, const core::Tensor& t) {
    if (name == "embed" || name == "blk.0.out" || name == "final_norm") {
      core::Tensor c = core::Tensor::empty(t.shape(), core::DType::kF32);
      std::memcpy(c.data(), t.data(), t.nbytes());
      dumps[std::string(name)] = c;
    }
  };
  core::Tensor logits;
  ASSERT_TRUE(model->forward(b, kv, logits, &hook).ok());
  for (const auto& [ours, theirs] :
       std::vector<std::pair<std::string, std::string>>{{"embed", "hidden.embed"},
                                                        {"blk.0.out", "hidden.blk.0.out"},
                                                        {"final_norm", "hidden.final_norm"}}) {
    core::Tensor g = golden(theirs);
    ASSERT_EQ(dumps[ours].numel(), g.numel()) << ours;
    const Diff d = compare(dumps[ours].data_as<float>(), g.data_as<float>(), static_cast<size_t>(g.numel()));
    EXPECT_LT(d.rel_l2, kHiddenRelL2) << ours;
  }
  core::Tensor g = golden("prompt_logits_last");
  const Diff d = compare(logits.data_as<float>(), g.data_as<float>(), static_cast<size_t>(g.numel()));
  EXPECT_LT(d.max_abs, kLogitsMaxAbs);
  EXPECT_FALSE(d.has_nan);
}

// The encoder cache: the same media again is served from the cache with the same embeddings; one
// changed pixel is a miss.
TEST_P(VlE2E, EncoderCacheReusesIdenticalMedia) {
  auto ops = cpu_ops();
  auto model = load(*ops);
  ASSERT_NE(model, nullptr);
  auto items = load_media(request_);
  const std::string prompt = golden_["prompt"].get<std::string>();
  auto first = model->prepare_multimodal(prompt, *tok_, items);
  ASSERT_TRUE(first.ok()) << first.status().to_string();
  auto again = model->prepare_multimodal(prompt, *tok_, items);
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_EQ(again->encoder_cache_hits, static_cast<int32_t>(items.size()));
  ASSERT_EQ(first->spans.size(), again->spans.size());
  for (size_t i = 0; i < first->spans.size(); ++i) {
    const auto& a = first->spans[i].embeds;
    const auto& b = again->spans[i].embeds;
    ASSERT_EQ(a.nbytes(), b.nbytes());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.nbytes()), 0) << "span " << i;
  }
  for (auto& it : items) {
    if (it.kind != models::MediaItem::Kind::kImage) continue;
    it.image.rgb[0] ^= 0x40;  // one pixel changed: this image must be encoded again
    auto changed = model->prepare_multimodal(prompt, *tok_, items);
    ASSERT_TRUE(changed.ok()) << changed.status().to_string();
    EXPECT_EQ(changed->encoder_cache_hits, static_cast<int32_t>(items.size()) - 1);
    break;
  }
}

// Generation through the engine: the whole prompt in one step, and chunks of 7 tokens that cut
// the vision spans (and the rows where t/h/w positions differ) at arbitrary places.
TEST_P(VlE2E, GreedyGenerationMatchesTransformers) {
  for (int32_t budget : {4096, 7}) {
    auto ops = cpu_ops();
    auto model = load(*ops);
    ASSERT_NE(model, nullptr);
    auto items = load_media(request_);
    auto mm = model->prepare_multimodal(golden_["prompt"].get<std::string>(), *tok_, items);
    ASSERT_TRUE(mm.ok()) << mm.status().to_string();
    engine::EngineConfig ec;
    ec.max_model_len = 512;
    ec.scheduler.max_num_batched_tokens = budget;
    engine::Engine eng(std::move(model), *tok_, ec);
    engine::SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 8;
    p.ignore_eos = true;
    p.logprobs = 5;
    auto id = eng.add_multimodal_sequence(std::make_shared<models::MultimodalPrompt>(std::move(*mm)), p);
    ASSERT_TRUE(id.ok()) << id.status().to_string();
    std::vector<engine::SampleResult> out;
    while (eng.has_unfinished()) {
      auto r = eng.step();
      ASSERT_TRUE(r.ok()) << r.status().to_string();
      for (const auto& o : *r)
        for (const auto& s : o.new_samples) out.push_back(s);
    }
    const auto want = golden_["output_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(out.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(out[i].token, want[i]) << "budget " << budget << " step " << i;
      EXPECT_NEAR(out[i].logprob, golden_["steps"][i]["logprob"].get<double>(), kLogprobAbs)
          << "budget " << budget << " step " << i;
    }
  }
}

// The whole request path: OpenAI JSON -> media loading under the allowed directory -> chat template
// -> prepare_multimodal -> engine, through the chat service `loom generate --request` uses.
TEST_P(VlE2E, ChatServiceAnswersTheRequest) {
  server::ServiceOptions opt;
  opt.model_dir = model_dir_;
  opt.device = "cpu";
  opt.weight_dtype = models::WeightDType::kF32;
  opt.multimodal.policy.allowed_local_media_path = repo_root();
  auto svc = server::ChatService::load(opt);
  ASSERT_TRUE(svc.ok()) << svc.status().to_string();
  nlohmann::ordered_json body = nlohmann::ordered_json::parse(request_.dump());
  for (auto& m : body["messages"]) {
    if (!m["content"].is_array()) continue;
    for (auto& part : m["content"]) {
      for (const char* key : {"image_url", "video_url"}) {
        if (!part.contains(key)) continue;
        std::string url = part[key]["url"];
        if (url.rfind("data:", 0) != 0) part[key]["url"] = repo_root() + "/" + url;
      }
    }
  }
  auto req = server::parse_chat_request(body, (*svc)->sampling_defaults());
  ASSERT_TRUE(req.ok()) << req.status().to_string();
  auto prompt = (*svc)->render_prompt(*req);
  ASSERT_TRUE(prompt.ok()) << prompt.status().to_string();
  EXPECT_EQ(*prompt, golden_["prompt"].get<std::string>());
  auto result = (*svc)->complete(*req);
  ASSERT_TRUE(result.ok()) << result.status().to_string();
  EXPECT_EQ(result->prompt_token_ids, golden_["input_ids"].get<std::vector<int32_t>>());
  EXPECT_EQ(result->choices.at(0).token_ids, golden_["output_ids"].get<std::vector<int32_t>>());
}

std::vector<Case> all_cases() {
  std::vector<Case> v;
  for (const char* m : {"qwen2_5-vl-tiny", "qwen3-vl-tiny"})
    for (const char* c : {"one_image", "multi_image", "video", "mixed", "multi_turn"}) v.push_back({m, c});
  return v;
}

INSTANTIATE_TEST_SUITE_P(Cases, VlE2E, ::testing::ValuesIn(all_cases()), [](const auto& info) {
  std::string n = info.param.model + "_" + info.param.name;
  for (auto& ch : n)
    if (ch == '-' || ch == '.') ch = '_';
  return n;
});

}  // namespace
}  // namespace loom::testing
