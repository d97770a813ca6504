// Whisper log-mel features and Qwen2.5-Omni audio token counts, equal to transformers'
// WhisperFeatureExtractor as Qwen2_5OmniProcessor calls it (padding="max_length", truncation,
// return_attention_mask=True).
//
// What transformers does (5.24, torch path): the PCM is truncated / zero-padded to n_samples =
// chunk_length * sampling_rate samples; torch.stft(n_fft, hop, periodic Hann, center=True, reflect
// padding of the *padded* signal) gives n_samples / hop + 1 frames, the last is dropped; power
// spectrum; Slaney mel filters (0..8000 Hz, Slaney norm); log10(max(x, 1e-10)); clamp at
// (global max over ALL n_samples / hop frames) - 8; (x + 4) / 4. The attention mask, subsampled
// every hop samples, has min(ceil(L / hop), n_samples / hop) ones: the valid frame count.
//
// We compute only the valid frames (plus the few frames past them whose windows still see the
// signal, because they take part in the global max), as if the signal were padded: samples past
// the input are zero, reflection happens at n_samples, not at the input's end. So features and the
// valid length equal transformers' without materialising the padding. Audio longer than n_samples
// is truncated, as transformers does (Qwen2.5-Omni: 300 s).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom::models::qwen_omni {

// WhisperFeatureExtractor settings. Defaults are Qwen2.5-Omni's shipped preprocessor_config.json;
// the parser starts from WhisperFeatureExtractor's class defaults (feature_size 80, chunk_length 30)
// for keys a file leaves out, as transformers does.
struct WhisperFeatureConfig {
  int32_t feature_size = 128;  // mel bins
  int32_t sampling_rate = 16000;
  int32_t hop_length = 160;
  int32_t n_fft = 400;
  int32_t chunk_length = 300;  // seconds; n_samples = chunk_length * sampling_rate
  double padding_value = 0.0;
  double dither = 0.0;

  int64_t n_samples() const { return int64_t{chunk_length} * sampling_rate; }
  // Frames of transformers' (padded) feature tensor: n_samples / hop_length (nb_max_frames).
  int64_t max_frames() const { return n_samples() / hop_length; }
  // InvalidArgument for non-positive sizes or n_samples <= n_fft / 2 (torch's reflect padding
  // needs more samples than the pad); Unsupported for dither != 0 (random: not reproducible),
  // padding_value != 0, odd n_fft or one with a prime factor above 7, or feature_size above n_fft / 2 + 1.
  core::Status validate() const;
};

// Parses one feature-extractor JSON object (preprocessor_config.json's text, or processor_config.json's
// "feature_extractor" value re-serialised). `origin` names it in errors. Validated.
core::Expected<WhisperFeatureConfig> parse_whisper_feature_config(const std::string& json_text,
                                                                  const std::string& origin);
// processor_config.json's "feature_extractor" (transformers v5 layout), else preprocessor_config.json.
// NotFound when neither exists.
core::Expected<WhisperFeatureConfig> load_whisper_feature_config(const std::string& model_dir);

// Valid mel frames for `num_samples` input samples: the feature attention mask's sum,
// min(ceil(num_samples / hop), n_samples / hop).
int64_t valid_mel_frames(int64_t num_samples, const WhisperFeatureConfig& cfg);

// Qwen2.5-Omni's audio token count for `mel_frames` valid frames (processor's
// _get_feat_extract_output_lengths: two stride-2 reductions, Python floor division):
//   a = (mel_frames - 1) // 2 + 1;  tokens = (a - 2) // 2 + 1.
int64_t audio_token_count(int64_t mel_frames);

struct LogMel {
  int64_t n_mels = 0;
  int64_t frames = 0;       // valid frames (== valid_mel_frames(samples))
  std::vector<float> data;  // [n_mels, frames], row-major
  bool truncated = false;   // the input was longer than n_samples and was cut, as transformers does
};

// `pcm` is mono at cfg.sampling_rate (not resampled here). num_threads <= 0: hardware concurrency.
// Errors: cfg.validate()'s.
core::Expected<LogMel> log_mel(std::span<const float> pcm, const WhisperFeatureConfig& cfg,
                               int num_threads = 0);

// Slaney mel filter bank as transformers' mel_filter_bank(num_frequency_bins = n_fft / 2 + 1,
// feature_size, 0 Hz, 8000 Hz, norm="slaney", mel_scale="slaney"), computed in double.
// [n_fft / 2 + 1, feature_size], row-major.
std::vector<double> slaney_mel_filters(const WhisperFeatureConfig& cfg);

}  // namespace loom::models::qwen_omni
