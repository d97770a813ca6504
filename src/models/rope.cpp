#include "models/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace loom::models {
namespace {

// transformers' get_mscale for yarn.
double yarn_mscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double yarn_correction_dim(double rotations, int64_t dim, double base, double max_pos) {
  return (static_cast<double>(dim) * std::log(max_pos / (rotations * 2 * std::numbers::pi))) /
         (2 * std::log(base));
}

}  // namespace

core::Status rope_inv_freq(const RopeConfig& rope, int64_t head_dim, int64_t max_position_embeddings,
                           std::vector<float>* inv_freq, float* attention_factor) {
  const auto dim = static_cast<int64_t>(static_cast<double>(head_dim) * rope.partial_rotary_factor);
  if (dim <= 0 || dim % 2 != 0 || dim > head_dim)
    return core::invalid_argument("rotary dimension " + std::to_string(dim) + " is invalid for head_dim " +
                                  std::to_string(head_dim));
  const int64_t half = dim / 2;
  // base ** (arange(0, dim, 2) / dim) in f32, then 1 / that (as torch computes it).
  const auto base = static_cast<float>(rope.theta);
  std::vector<float> pos_freqs(half);
  for (int64_t i = 0; i < half; ++i)
    pos_freqs[i] = std::pow(base, static_cast<float>(2 * i) / static_cast<float>(dim));
  inv_freq->assign(half, 0.0f);
  *attention_factor = 1.0f;
  const auto factor = static_cast<float>(rope.factor);

  if (rope.type == "default" || rope.type == "mrope") {
    for (int64_t i = 0; i < half; ++i) (*inv_freq)[i] = 1.0f / pos_freqs[i];
  } else if (rope.type == "linear") {
    for (int64_t i = 0; i < half; ++i) (*inv_freq)[i] = (1.0f / pos_freqs[i]) / factor;
  } else if (rope.type == "yarn") {
    double orig = rope.original_max_position_embeddings > 0
                      ? static_cast<double>(rope.original_max_position_embeddings)
                      : static_cast<double>(max_position_embeddings);
    double att = rope.attention_factor;
    if (att <= 0) {
      att = (rope.mscale > 0 && rope.mscale_all_dim > 0)
                ? yarn_mscale(rope.factor, rope.mscale) / yarn_mscale(rope.factor, rope.mscale_all_dim)
                : yarn_mscale(rope.factor, 1.0);
    }
    double low = std::floor(yarn_correction_dim(rope.beta_fast, dim, rope.theta, orig));
    double high = std::ceil(yarn_correction_dim(rope.beta_slow, dim, rope.theta, orig));
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(dim - 1));
    if (low == high) high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      float ramp = (static_cast<float>(i) - static_cast<float>(low)) / static_cast<float>(high - low);
      ramp = std::clamp(ramp, 0.0f, 1.0f);
      float extrapolation_factor = 1.0f - ramp;
      float extra = 1.0f / pos_freqs[i];
      float inter = 1.0f / (factor * pos_freqs[i]);
      (*inv_freq)[i] = inter * (1.0f - extrapolation_factor) + extra * extrapolation_factor;
    }
    *attention_factor = static_cast<float>(att);
  } else if (rope.type == "llama3") {
    const double old_ctx = static_cast<double>(rope.original_max_position_embeddings);
    if (old_ctx <= 0) return core::invalid_argument("llama3 rope needs original_max_position_embeddings");
    const double low_wavelen = old_ctx / rope.low_freq_factor;
    const double high_wavelen = old_ctx / rope.high_freq_factor;
    for (int64_t i = 0; i < half; ++i) {
      float f = 1.0f / pos_freqs[i];
      float wavelen = 2.0f * static_cast<float>(std::numbers::pi) / f;
      float scaled = wavelen > low_wavelen ? f / factor : f;
      bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) {
        float smooth = (static_cast<float>(old_ctx) / wavelen - static_cast<float>(rope.low_freq_factor)) /
                       static_cast<float>(rope.high_freq_factor - rope.low_freq_factor);
        scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
      (*inv_freq)[i] = scaled;
    }
  } else {
    return core::unsupported("rope scaling type '" + rope.type +
                             "' is not supported (supported: default, linear, yarn, llama3)");
  }
  return {};
}

core::Expected<RopeTables> make_rope_tables(const RopeConfig& rope, int64_t head_dim,
                                            int64_t max_position_embeddings, int64_t max_positions) {
  std::vector<float> inv_freq;
  float attention_factor = 1.0f;
  LOOM_RETURN_IF_ERROR(rope_inv_freq(rope, head_dim, max_position_embeddings, &inv_freq, &attention_factor));
  RopeTables t;
  const auto half = static_cast<int64_t>(inv_freq.size());
  t.rotary_dim = static_cast<int32_t>(2 * half);
  t.max_positions = max_positions;
  t.cos = core::Tensor::empty({max_positions, half}, core::DType::kF32);
  t.sin = core::Tensor::empty({max_positions, half}, core::DType::kF32);
  float* c = t.cos.data_as<float>();
  float* s = t.sin.data_as<float>();
  for (int64_t p = 0; p < max_positions; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];  // f32 product, as transformers' matmul
      c[p * half + i] = std::cos(angle) * attention_factor;
      s[p * half + i] = std::sin(angle) * attention_factor;
    }
  }
  return t;
}

}  // namespace loom::models
