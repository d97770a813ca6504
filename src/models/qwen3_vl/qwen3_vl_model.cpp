#include "models/qwen3_vl/qwen3_vl_model.h"

#include <algorithm>
#include <chrono>

#include "models/qwen3_vl/mrope_positions.h"
#include "models/qwen3_vl/processor.h"
#include "models/qwen3_vl/video_processor.h"
#include "models/qwen3_vl/vision_config.h"
#include "models/qwen3_vl/vision_tower.h"
#include "models/qwen_vl/image_processor.h"
#include "models/vision_language.h"

namespace loom::models::qwen3_vl {
namespace {

class Qwen3VLModel final : public VisionLanguageModel {
 public:
  Qwen3VLModel(std::unique_ptr<CausalLM> decoder, std::unique_ptr<Qwen3VisionTower> tower,
               const ModelConfig& config, const LoadOptions& options)
      : VisionLanguageModel(std::move(decoder)), tower_(std::move(tower)), threads_(options.num_threads) {
    mrope_.image_token_id = static_cast<int32_t>(config.image_token_id);
    mrope_.video_token_id = static_cast<int32_t>(config.video_token_id);
    mrope_.spatial_merge_size = static_cast<int32_t>(tower_->config().spatial_merge_size);
    processor_ = load_processor_config(options.model_dir);  // required once a request has media
  }

  core::Expected<MultimodalPrompt> prepare_multimodal(const std::string& prompt, const text::Tokenizer& tok,
                                                      std::span<const MediaItem> items) override {
    const auto t0 = std::chrono::steady_clock::now();
    if (!items.empty() && !processor_.ok()) return processor_.status().with_context("processor config");
    std::vector<qwen_vl::ProcessedImage> processed;
    std::vector<std::array<int64_t, 3>> image_grids;
    std::vector<VideoPrompt> videos;
    std::vector<VisionGrid> image_vgrids, video_vgrids;
    for (const MediaItem& item : items) {
      if (item.kind == MediaItem::Kind::kImage) {
        auto p = qwen_vl::process_image(item.image.rgb.data(), item.image.width, item.image.height,
                                        processor_->image, threads_);
        if (!p.ok()) return p.status().with_context(item.where);
        image_grids.push_back(p->grid_thw);
        image_vgrids.push_back({p->grid_thw[0], p->grid_thw[1], p->grid_thw[2]});
        processed.push_back(std::move(*p));
      } else {
        const VideoProcessorConfig& vc = processor_->video;
        auto sampler = [&vc](const media::VideoInfo& info) -> core::Expected<std::vector<int64_t>> {
          if (!vc.do_sample_frames) {
            std::vector<int64_t> all(static_cast<size_t>(info.num_frames));
            for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
            return all;
          }
          VideoMetadata meta;
          meta.total_num_frames = info.num_frames;
          if (info.fps > 0) meta.fps = info.fps;
          return sample_frame_indices(meta, vc);
        };
        LOOM_ASSIGN_OR_RETURN(Frames frames, video_frames(item, sampler));
        auto p = process_video(frames.rgb, frames.width, frames.height, vc, threads_);
        if (!p.ok()) return p.status().with_context(item.where);
        VideoPrompt v;
        v.grid_thw = p->grid_thw;
        v.timestamps = frame_timestamps(frames.indices, frames.video_fps, vc.image.temporal_patch_size);
        videos.push_back(std::move(v));
        video_vgrids.push_back({p->grid_thw[0], p->grid_thw[1], p->grid_thw[2]});
        processed.push_back(std::move(*p));
      }
    }
    PlaceholderTokens tokens;
    tokens.image_pad = tok.id_to_token(mrope_.image_token_id);
    tokens.video_pad = tok.id_to_token(mrope_.video_token_id);
    auto expanded =
        expand_prompt(prompt, image_grids, videos, processor_.ok() ? processor_->image.merge_size : 2,
                      processor_.ok() ? processor_->video.image.merge_size : 2, tokens);
    if (!expanded.ok()) return expanded.status().with_context("placeholders of the prompt");
    MultimodalPrompt out;
    out.token_ids = tok.encode(*expanded, /*parse_special=*/true);
    LOOM_ASSIGN_OR_RETURN(MropePositions pos,
                          mrope_positions(out.token_ids, image_vgrids, video_vgrids, mrope_));
    out.mrope_positions.reserve(3 * out.token_ids.size());
    for (const auto* row : {&pos.t, &pos.h, &pos.w})
      out.mrope_positions.insert(out.mrope_positions.end(), row->begin(), row->end());
    out.rope_delta = pos.rope_delta;
    out.preprocess_ms = elapsed_ms(t0);

    // Encoder rows -> spans: an image is one run of pad tokens; a video one run per temporal step
    // (each frame pair sits in its own <t seconds><|vision_start|>...<|vision_end|>).
    const auto t1 = std::chrono::steady_clock::now();
    Runs image_runs{pad_runs(out.token_ids, mrope_.image_token_id)};
    Runs video_runs{pad_runs(out.token_ids, mrope_.video_token_id)};
    for (size_t i = 0; i < items.size(); ++i) {
      const bool image = items[i].kind == MediaItem::Kind::kImage;
      const std::array<int64_t, 3> grid = processed[i].grid_thw;
      LOOM_ASSIGN_OR_RETURN(EncoderOutput enc,
                            encode_cached(
                                processed[i].pixel_values, grid, !image,
                                [&]() -> core::Expected<EncoderOutput> {
                                  LOOM_ASSIGN_OR_RETURN(
                                      VisionOutput vo,
                                      tower_->forward(processed[i].pixel_values, {&grid, 1}));
                                  return EncoderOutput{vo.embeds, vo.deepstack};
                                },
                                out));
      LOOM_RETURN_IF_ERROR(
          place_embeddings(enc, image ? 1 : grid[0], image ? image_runs : video_runs, items[i].where, out));
    }
    sort_spans(out);
    out.encode_ms = elapsed_ms(t1);
    return out;
  }

 private:
  std::unique_ptr<Qwen3VisionTower> tower_;
  int threads_ = 0;
  MropeConfig mrope_{};
  core::Expected<ProcessorConfig> processor_ = core::not_found("");
};

}  // namespace

core::Expected<std::unique_ptr<CausalLM>> make_qwen3_vl(const ModelConfig& config, const Checkpoint& ckpt,
                                                        ops::Ops& ops, const LoadOptions& options) {
  LOOM_ASSIGN_OR_RETURN(auto decoder, load_vl_decoder(config, ckpt, ops, options, "Qwen3-VL"));
  LOOM_ASSIGN_OR_RETURN(VisionConfig vcfg, parse_vision_config(config.vision_raw));
  auto tower = Qwen3VisionTower::load(vcfg, ckpt, ops);
  if (!tower.ok()) return tower.status().with_context("loading the vision tower");
  return std::unique_ptr<CausalLM>(
      std::make_unique<Qwen3VLModel>(std::move(decoder), std::move(*tower), config, options));
}

}  // namespace loom::models::qwen3_vl
