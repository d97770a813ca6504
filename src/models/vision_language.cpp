#include "models/vision_language.h"

#include <algorithm>
#include <cstring>

#include "models/qwen/qwen_decoder.h"

namespace loom::models {

core::Expected<std::unique_ptr<CausalLM>> load_vl_decoder(const ModelConfig& config, const Checkpoint& ckpt,
                                                          ops::Ops& ops, const LoadOptions& options,
                                                          const std::string& family) {
  if (config.text.rope.mrope_section.empty())
    return core::invalid_argument("config.json: " + family + " needs rope_scaling.mrope_section");
  if (config.image_token_id < 0 || config.video_token_id < 0)
    return core::invalid_argument("config.json: image_token_id / video_token_id missing");
  return qwen::make_qwen_causal_lm(config, ckpt, ops, options);
}

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

core::Tensor VisionLanguageModel::to_host_activations(const core::Tensor& t) {
  ops::Ops& ops = backend();
  core::Tensor h = ops.to_host(t);
  const core::DType want = ops.activation_dtype();
  if (h.dtype() == want) {
    // A view into the backend's memory (the CPU returns its tensor): copy so it outlives the step.
    core::Tensor copy = core::Tensor::empty(h.shape(), h.dtype());
    std::memcpy(copy.data(), h.data(), h.nbytes());
    return copy;
  }
  core::Tensor f = h.dtype() == core::DType::kF32 ? h : h.to_f32();
  if (want == core::DType::kF32) return f;
  core::Tensor out = core::Tensor::empty(f.shape(), want);
  core::convert_from_f32(f.data_as<float>(), want, out.data(), static_cast<size_t>(f.numel()));
  return out;
}

core::Status VisionLanguageModel::place_embeddings(const core::Tensor& embeds,
                                                   const std::vector<core::Tensor>& deepstack, int64_t pieces,
                                                   Runs& runs, const std::string& where,
                                                   MultimodalPrompt& out) {
  core::Tensor emb = to_host_activations(embeds);
  std::vector<core::Tensor> deep;
  for (const auto& d : deepstack) deep.push_back(to_host_activations(d));
  const int64_t hidden = text_config().hidden_size;
  if (emb.rank() != 2 || emb.dim(1) != hidden || pieces < 1 || emb.dim(0) % pieces != 0)
    return core::invalid_argument(where + ": the vision tower gives " + core::shape_to_string(emb.shape()) +
                                  " embeddings for a decoder of width " + std::to_string(hidden));
  const int64_t rows = emb.dim(0) / pieces;
  for (int64_t k = 0; k < pieces; ++k) {
    if (runs.next >= runs.runs.size()) return core::internal_error(where + ": no placeholder run left");
    const auto [offset, length] = runs.runs[runs.next++];
    if (length != rows)
      return core::internal_error(where + ": placeholder run of " + std::to_string(length) + " tokens for " +
                                  std::to_string(rows) + " embeddings");
    MultimodalSpan span;
    span.offset = offset;
    span.length = length;
    span.embeds = emb.slice_rows(k * rows, (k + 1) * rows);
    for (const auto& d : deep) span.deepstack.push_back(d.slice_rows(k * rows, (k + 1) * rows));
    out.spans.push_back(std::move(span));
  }
  return {};
}

void VisionLanguageModel::sort_spans(MultimodalPrompt& out) {
  std::sort(out.spans.begin(), out.spans.end(),
            [](const MultimodalSpan& a, const MultimodalSpan& b) { return a.offset < b.offset; });
}

std::vector<std::pair<int64_t, int64_t>> VisionLanguageModel::pad_runs(std::span<const int32_t> ids,
                                                                       int32_t pad_id) {
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (size_t i = 0; i < ids.size();) {
    if (ids[i] != pad_id) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < ids.size() && ids[j] == pad_id) ++j;
    runs.emplace_back(static_cast<int64_t>(i), static_cast<int64_t>(j - i));
    i = j;
  }
  return runs;
}

core::Expected<VisionLanguageModel::Frames> VisionLanguageModel::video_frames(const MediaItem& item,
                                                                              const FrameSampler& sample) {
  Frames f;
  if (!item.frames.empty()) {
    f.width = item.frames[0].width;
    f.height = item.frames[0].height;
    for (const auto& im : item.frames) {
      if (im.width != f.width || im.height != f.height)
        return core::invalid_argument(item.where + ": the frames of a video must all have one size");
      f.rgb.push_back(im.rgb.data());
    }
    // transformers: VideoMetadata without fps -> sampled_fps 24 when nothing else is known.
    f.sampled_fps = item.frames_fps > 0 ? item.frames_fps : 24.0;
    f.video_fps = f.sampled_fps;
    for (size_t i = 0; i < item.frames.size(); ++i) f.indices.push_back(static_cast<int64_t>(i));
    return f;
  }
  if (!item.video_bytes && !item.decode_frames)
    return core::invalid_argument(item.where + ": video without data");
  auto indices = sample(item.video_info);
  if (!indices.ok()) return indices.status().with_context(item.where);
  if (item.decode_frames) {
    auto images = item.decode_frames(*indices);
    if (!images.ok()) return images.status().with_context(item.where);
    f.owned = std::move(*images);
  } else {
    auto frames = media::decode_video_frames(*item.video_bytes, *indices);
    if (!frames.ok()) return frames.status().with_context(item.where);
    for (auto& fr : *frames) f.owned.push_back(std::move(fr.image));
  }
  f.indices = std::move(*indices);
  f.width = item.video_info.width;
  f.height = item.video_info.height;
  for (const auto& im : f.owned)
    if (im.width != f.width || im.height != f.height)
      return core::unsupported(item.where + ": the video changes resolution mid-stream");
  for (const auto& im : f.owned) f.rgb.push_back(im.rgb.data());
  f.video_fps = item.video_info.fps;
  f.sampled_fps = item.video_info.num_frames > 0
                      ? static_cast<double>(f.indices.size()) /
                            static_cast<double>(item.video_info.num_frames) * item.video_info.fps
                      : item.video_info.fps;
  return f;
}

}  // namespace loom::models
