// Shared plumbing of the vision-language families (Qwen2.5-VL, Qwen3-VL): a CausalLM that owns a
// text decoder and forwards the decoder interface to it, plus helpers every family's
// prepare_multimodal needs (frame sampling inputs, placeholder runs, embeddings to the host in the
// backend's activation dtype). The family classes (models/<family>/) add the processor and encoder.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
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
  // One item's encoder output on the host, in the activation dtype.
  struct EncoderOutput {
    core::Tensor embeds;                  // [tokens, hidden]
    std::vector<core::Tensor> deepstack;  // Qwen3-VL: per DeepStack layer, [tokens, hidden]
  };
  // The encoder cache (vLLM's encoder cache, keyed by content): the output for these processed
  // pixels and grid, from the cache or from `run` (whose device tensors are copied to the host and
  // kept, least recently used first out, up to kEncoderCacheBytes). The key is two independent 64-bit
  // hashes of the pixel values, grid and kind, so a hit does not rest on one hash. Counts hits in
  // out.encoder_cache_hits.
  using EncoderRun = std::function<core::Expected<EncoderOutput>()>;
  core::Expected<EncoderOutput> encode_cached(const core::Tensor& pixel_values,
                                              const std::array<int64_t, 3>& grid, bool video,
                                              const EncoderRun& run, MultimodalPrompt& out);
  static constexpr size_t kEncoderCacheBytes = size_t{512} << 20;
  // Gives one item's encoder output to the next `pieces` runs of `runs`, `rows / pieces` rows each
  // (a Qwen3-VL video takes one run per temporal step), with the matching DeepStack rows (views, no
  // copies). Appends to out.spans.
  core::Status place_embeddings(const EncoderOutput& encoded, int64_t pieces, Runs& runs,
                                const std::string& where, MultimodalPrompt& out);
  // Sorts the spans by offset (items of different kinds were placed kind by kind).
  static void sort_spans(MultimodalPrompt& out);

  std::unique_ptr<CausalLM> decoder_;

 private:
  struct CacheKey {
    uint64_t a = 0, b = 0;
    bool operator==(const CacheKey& o) const { return a == o.a && b == o.b; }
  };
  struct CacheKeyHash {
    size_t operator()(const CacheKey& k) const {
      return static_cast<size_t>(k.a ^ (k.b * 0x9e3779b97f4a7c15ULL));
    }
  };
  std::list<std::pair<CacheKey, EncoderOutput>> cache_lru_;  // most recent first
  std::unordered_map<CacheKey, std::list<std::pair<CacheKey, EncoderOutput>>::iterator, CacheKeyHash> cache_;
  size_t cache_bytes_ = 0;
};

double elapsed_ms(std::chrono::steady_clock::time_point since);

// The text decoder of a vision-language checkpoint, after the checks every family needs
// (mrope_section, image/video token ids); `family` names it in errors ("Qwen2.5-VL").
core::Expected<std::unique_ptr<CausalLM>> load_vl_decoder(const ModelConfig& config, const Checkpoint& ckpt,
                                                          ops::Ops& ops, const LoadOptions& options,
                                                          const std::string& family);

}  // namespace loom::models
