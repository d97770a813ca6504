// Shared plumbing of the vision-language families (Qwen2.5-VL, Qwen3-VL): a CausalLM that owns a
// text decoder and forwards the decoder interface to it, plus helpers every family's
// prepare_multimodal needs (frame sampling inputs, placeholder runs, embeddings to the host in the
// backend's activation dtype). The family classes (models/<family>/) add the processor and encoder.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "models/checkpoint/checkpoint.h"
#include "models/model.h"
#include "models/multimodal.h"

namespace loom::models {

class VisionLanguageModel : public CausalLM {
 public:
  explicit VisionLanguageModel(std::unique_ptr<CausalLM> decoder) : decoder_(std::move(decoder)) {}

  const TextConfig& text_config() const override { return decoder_->text_config(); }
  int64_t num_layers() const override { return decoder_->num_layers(); }
  int64_t num_kv_heads() const override { return decoder_->num_kv_heads(); }
  int64_t head_dim() const override { return decoder_->head_dim(); }
  int64_t vocab_size() const override { return decoder_->vocab_size(); }
  std::vector<LayerKv> allocate_kv(int64_t num_blocks, int32_t block_size) override {
    return decoder_->allocate_kv(num_blocks, block_size);
  }
  core::Status forward(const ForwardBatch& batch, std::vector<LayerKv>& kv, core::Tensor& logits,
                       const DumpHook* dump = nullptr, bool device_logits = false) override {
    return decoder_->forward(batch, kv, logits, dump, device_logits);
  }
  ops::Ops& backend() override { return decoder_->backend(); }
  bool multimodal() const override { return true; }

 protected:
  // An encoder output on the device -> host rows in the activation dtype (what ForwardBatch takes).
  core::Tensor to_host_activations(const core::Tensor& t);
  // The runs of `pad_id` in ids, in order: (offset, length).
  static std::vector<std::pair<int64_t, int64_t>> pad_runs(std::span<const int32_t> ids, int32_t pad_id);
  // A video item's frames (decoding the sampled indices of a file) as RGB pointers of one size.
  struct Frames {
    std::vector<media::Image> owned;
    std::vector<const uint8_t*> rgb;
    int32_t width = 0, height = 0;
    double sampled_fps = 0.0;  // transformers' VideoMetadata.sampled_fps
    double video_fps = 0.0;    // the source's frame rate (24 when a frame list does not say)
    std::vector<int64_t> indices;
  };
  // `sample` picks the frame indices of a video file from its probe (the family's rule).
  using FrameSampler = std::function<core::Expected<std::vector<int64_t>>(const media::VideoInfo&)>;
  static core::Expected<Frames> video_frames(const MediaItem& item, const FrameSampler& sample);

  // Placeholder runs of one kind (image or video pad), consumed in order by place_embeddings.
  struct Runs {
    std::vector<std::pair<int64_t, int64_t>> runs;  // (offset, length)
    size_t next = 0;
  };
  // Gives one item's encoder output (device tensors; copied to the host in the activation dtype)
  // to the next `pieces` runs of `runs`, `rows / pieces` rows each (a Qwen3-VL video takes one run
  // per temporal step), with the matching DeepStack rows. Appends to out.spans.
  core::Status place_embeddings(const core::Tensor& embeds, const std::vector<core::Tensor>& deepstack,
                                int64_t pieces, Runs& runs, const std::string& where, MultimodalPrompt& out);
  // Sorts the spans by offset (items of different kinds were placed kind by kind).
  static void sort_spans(MultimodalPrompt& out);

  std::unique_ptr<CausalLM> decoder_;
};

double elapsed_ms(std::chrono::steady_clock::time_point since);

// The text decoder of a vision-language checkpoint, after the checks every family needs
// (mrope_section, image/video token ids); `family` names it in errors ("Qwen2.5-VL").
core::Expected<std::unique_ptr<CausalLM>> load_vl_decoder(const ModelConfig& config, const Checkpoint& ckpt,
                                                          ops::Ops& ops, const LoadOptions& options,
                                                          const std::string& family);

}  // namespace loom::models
