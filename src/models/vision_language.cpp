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
    if (h.data() != t.data()) return h;  // to_host already made a fresh copy (a device backend)
    // The backend's own tensor (the CPU returns it as is): copy so it outlives the tower's buffers.
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

namespace {

// Two independent 64-bit multiply-xorshift hashes over the bytes (8 at a time) and a seed.
std::pair<uint64_t, uint64_t> hash_bytes(const void* data, size_t n, uint64_t seed) {
  uint64_t a = 0x243f6a8885a308d3ULL ^ seed, b = 0x13198a2e03707344ULL + seed * 0x9e3779b97f4a7c15ULL;
  auto mix = [](uint64_t h, uint64_t v, uint64_t k) {
    h ^= v * k;
    h = (h << 29) | (h >> 35);
    return h * 0xbf58476d1ce4e5b9ULL;
  };
  const auto* p = static_cast<const unsigned char*>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    a = mix(a, v, 0x94d049bb133111ebULL);
    b = mix(b, v ^ 0xa0761d6478bd642fULL, 0xe7037ed1a0b428dbULL);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  a = mix(a, tail ^ n, 0x94d049bb133111ebULL);
  b = mix(b, tail + n, 0xe7037ed1a0b428dbULL);
  a ^= a >> 31;
  b ^= b >> 29;
  return {a, b};
}

}  // namespace

core::Expected<VisionLanguageModel::EncoderOutput> VisionLanguageModel::encode_cached(
    const core::Tensor& pixel_values, const std::array<int64_t, 3>& grid, bool video, const EncoderRun& run,
    MultimodalPrompt& out) {
  auto output_bytes = [](const EncoderOutput& o) {
    size_t n = o.embeds.nbytes();
    for (const auto& d : o.deepstack) n += d.nbytes();
    return n;
  };
  const int64_t header[4] = {grid[0], grid[1], grid[2], video ? 1 : 0};
  const auto h1 = hash_bytes(header, sizeof header, 0);
  const auto h2 = hash_bytes(pixel_values.data(), pixel_values.nbytes(), h1.first ^ h1.second);
  const CacheKey key{h2.first, h2.second};
  if (auto it = cache_.find(key); it != cache_.end()) {
    cache_lru_.splice(cache_lru_.begin(), cache_lru_, it->second);  // most recent first
    ++out.encoder_cache_hits;
    return it->second->second;
  }
  LOOM_ASSIGN_OR_RETURN(EncoderOutput device, run());
  EncoderOutput host;
  host.embeds = to_host_activations(device.embeds);
  for (const auto& d : device.deepstack) host.deepstack.push_back(to_host_activations(d));
  const size_t bytes = output_bytes(host);
  if (bytes <= kEncoderCacheBytes) {
    while (cache_bytes_ + bytes > kEncoderCacheBytes && !cache_lru_.empty()) {
      cache_bytes_ -= output_bytes(cache_lru_.back().second);
      cache_.erase(cache_lru_.back().first);
      cache_lru_.pop_back();
    }
    cache_lru_.emplace_front(key, host);
    cache_[key] = cache_lru_.begin();
    cache_bytes_ += bytes;
  }
  return host;
}

core::Status VisionLanguageModel::place_embeddings(const EncoderOutput& encoded, int64_t pieces, Runs& runs,
                                                   const std::string& where, MultimodalPrompt& out) {
  const core::Tensor& emb = encoded.embeds;
  const std::vector<core::Tensor>& deep = encoded.deepstack;
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
  if (item.is_frame_list()) {
    if (item.frames.empty()) return core::invalid_argument(item.where + ": video without data");
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
  auto indices = sample(item.video_info);
  if (!indices.ok()) return indices.status().with_context(item.where);
  LOOM_ASSIGN_OR_RETURN(std::vector<media::VideoFrame> frames, decode_item_frames(item, *indices));
  for (auto& fr : frames) f.owned.push_back(std::move(fr.image));
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
