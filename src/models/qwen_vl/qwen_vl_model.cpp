#include "models/qwen_vl/qwen_vl_model.h"

#include <chrono>

#include "models/qwen_vl/image_processor.h"
#include "models/qwen_vl/mrope_positions.h"
#include "models/qwen_vl/video_processor.h"
#include "models/qwen_vl/vision_config.h"
#include "models/qwen_vl/vision_tower.h"
#include "models/vision_language.h"

namespace loom::models::qwen_vl {
namespace {

class Qwen25VLModel final : public VisionLanguageModel {
 public:
  Qwen25VLModel(std::unique_ptr<CausalLM> decoder, std::unique_ptr<Qwen25VisionTower> tower,
                const ModelConfig& config, const LoadOptions& options)
      : VisionLanguageModel(std::move(decoder)), tower_(std::move(tower)), threads_(options.num_threads) {
    mrope_.image_token_id = static_cast<int32_t>(config.image_token_id);
    mrope_.video_token_id = static_cast<int32_t>(config.video_token_id);
    mrope_.vision_start_token_id = static_cast<int32_t>(config.vision_start_token_id);
    mrope_.spatial_merge_size = static_cast<int32_t>(tower_->config().spatial_merge_size);
    mrope_.tokens_per_second = config.vision_raw.value("tokens_per_second", 4.0);
    // Processor configs are read now but only required once a request carries media.
    image_cfg_ = load_image_processor_config(options.model_dir);
    video_cfg_ = load_video_processor_config(options.model_dir);
  }

  core::Expected<MultimodalPrompt> prepare_multimodal(const std::string& prompt, const text::Tokenizer& tok,
                                                      std::span<const MediaItem> items) override {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<ProcessedImage> processed;
    std::vector<VisionGrid> image_grids, video_grids;
    std::vector<int64_t> image_counts, video_counts;
    std::vector<double> second_per_grid;
    for (const MediaItem& item : items) {
      if (item.kind == MediaItem::Kind::kImage) {
        if (!image_cfg_.ok()) return image_cfg_.status().with_context("image processor config");
        auto p =
            process_image(item.image.rgb.data(), item.image.width, item.image.height, *image_cfg_, threads_);
        if (!p.ok()) return p.status().with_context(item.where);
        image_grids.push_back({p->grid_thw[0], p->grid_thw[1], p->grid_thw[2]});
        image_counts.push_back(p->num_tokens());
        processed.push_back(std::move(*p));
      } else {
        if (!video_cfg_.ok()) return video_cfg_.status().with_context("video processor config");
        const VideoProcessorConfig& vc = *video_cfg_;
        media::FrameSampling s;
        s.fps = vc.fps.value_or(2.0);
        s.min_frames = vc.min_frames;
        s.max_frames = vc.max_frames;
        s.temporal_patch_size = vc.image.temporal_patch_size;
        s.num_frames = vc.num_frames.value_or(0);
        LOOM_ASSIGN_OR_RETURN(Frames frames, video_frames(item, [&s](const media::VideoInfo& info) {
                                return media::qwen_sample_frame_indices(info, s);
                              }));
        auto p = process_video(frames.rgb, frames.width, frames.height, vc, threads_);
        if (!p.ok()) return p.status().with_context(item.where);
        video_grids.push_back({p->grid_thw[0], p->grid_thw[1], p->grid_thw[2]});
        video_counts.push_back(p->num_tokens());
        second_per_grid.push_back(static_cast<double>(vc.image.temporal_patch_size) / frames.sampled_fps);
        processed.push_back(std::move(*p));
      }
    }
    MultimodalPrompt out;
    std::string text = prompt;
    const std::string image_pad = tok.id_to_token(mrope_.image_token_id);
    const std::string video_pad = tok.id_to_token(mrope_.video_token_id);
    auto expanded = expand_placeholders(text, image_pad, image_counts);
    if (!expanded.ok()) return expanded.status().with_context("images of the prompt");
    expanded = expand_placeholders(*expanded, video_pad, video_counts);
    if (!expanded.ok()) return expanded.status().with_context("videos of the prompt");
    out.token_ids = tok.encode(*expanded, /*parse_special=*/true);
    LOOM_ASSIGN_OR_RETURN(MropePositions pos,
                          mrope_positions(out.token_ids, image_grids, video_grids, second_per_grid, mrope_));
    const size_t n = out.token_ids.size();
    out.mrope_positions.reserve(3 * n);
    out.mrope_positions.insert(out.mrope_positions.end(), pos.t.begin(), pos.t.end());
    out.mrope_positions.insert(out.mrope_positions.end(), pos.h.begin(), pos.h.end());
    out.mrope_positions.insert(out.mrope_positions.end(), pos.w.begin(), pos.w.end());
    out.rope_delta = pos.rope_delta;
    out.preprocess_ms = elapsed_ms(t0);

    const auto t1 = std::chrono::steady_clock::now();
    Runs image_runs{pad_runs(out.token_ids, mrope_.image_token_id)};
    Runs video_runs{pad_runs(out.token_ids, mrope_.video_token_id)};
    for (size_t i = 0; i < items.size(); ++i) {
      const std::array<int64_t, 3> grid = processed[i].grid_thw;
      const bool image = items[i].kind == MediaItem::Kind::kImage;
      LOOM_ASSIGN_OR_RETURN(
          EncoderOutput enc,
          encode_cached(
              processed[i].pixel_values, grid, !image,
              [&]() -> core::Expected<EncoderOutput> {
                LOOM_ASSIGN_OR_RETURN(core::Tensor e, tower_->forward(processed[i].pixel_values, {&grid, 1}));
                return EncoderOutput{e, {}};
              },
              out));
      LOOM_RETURN_IF_ERROR(place_embeddings(enc, 1, image ? image_runs : video_runs, items[i].where, out));
    }
    sort_spans(out);
    out.encode_ms = elapsed_ms(t1);
    return out;
  }

 private:
  std::unique_ptr<Qwen25VisionTower> tower_;
  int threads_ = 0;
  MropeConfig mrope_{};
  core::Expected<ImageProcessorConfig> image_cfg_ = core::not_found("");
  core::Expected<VideoProcessorConfig> video_cfg_ = core::not_found("");
};

}  // namespace

core::Expected<std::unique_ptr<CausalLM>> make_qwen2_5_vl(const ModelConfig& config, const Checkpoint& ckpt,
                                                          ops::Ops& ops, const LoadOptions& options) {
  LOOM_ASSIGN_OR_RETURN(auto decoder, load_vl_decoder(config, ckpt, ops, options, "Qwen2.5-VL"));
  LOOM_ASSIGN_OR_RETURN(VisionConfig vcfg, parse_vision_config(config.vision_raw));
  auto tower = Qwen25VisionTower::load(vcfg, ckpt, ops);
  if (!tower.ok()) return tower.status().with_context("loading the vision tower");
  return std::unique_ptr<CausalLM>(
      std::make_unique<Qwen25VLModel>(std::move(decoder), std::move(*tower), config, options));
}

}  // namespace loom::models::qwen_vl
