#include "models/qwen_vl/image_processor.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "models/qwen_vl/resize.h"

namespace loom::models::qwen_vl {

namespace detail {

core::Status check_aspect_ratio(int64_t height, int64_t width) {
  const double ratio =
      static_cast<double>(std::max(height, width)) / static_cast<double>(std::min(height, width));
  if (ratio > 200.0)
    return core::invalid_argument("absolute aspect ratio must be smaller than 200, got " +
                                  std::to_string(ratio));
  return core::Status::ok_status();
}

int64_t round_by_factor(int64_t side, int64_t factor) {
  // std::nearbyint under the default rounding mode rounds half to even, as Python's round().
  return static_cast<int64_t>(std::nearbyint(static_cast<double>(side) / static_cast<double>(factor))) *
         factor;
}

int64_t scaled_down_side(int64_t side, double beta, int64_t factor) {
  const double f = static_cast<double>(factor);
  return std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(side) / beta / f)) * factor);
}

int64_t scaled_up_side(int64_t side, double beta, int64_t factor) {
  const double f = static_cast<double>(factor);
  return static_cast<int64_t>(std::ceil(static_cast<double>(side) * beta / f)) * factor;
}

}  // namespace detail

core::Expected<std::pair<int64_t, int64_t>> smart_resize(int64_t height, int64_t width, int64_t factor,
                                                         int64_t min_pixels, int64_t max_pixels) {
  if (height <= 0 || width <= 0)
    return core::invalid_argument("image size " + std::to_string(width) + "x" + std::to_string(height) +
                                  " must be positive");
  if (factor <= 0) return core::invalid_argument("resize factor must be positive");
  LOOM_RETURN_IF_ERROR(detail::check_aspect_ratio(height, width));
  const double h = static_cast<double>(height);
  const double w = static_cast<double>(width);
  int64_t h_bar = detail::round_by_factor(height, factor);
  int64_t w_bar = detail::round_by_factor(width, factor);
  if (h_bar * w_bar > max_pixels) {
    const double beta = std::sqrt((h * w) / static_cast<double>(max_pixels));
    h_bar = detail::scaled_down_side(height, beta, factor);
    w_bar = detail::scaled_down_side(width, beta, factor);
  } else if (h_bar * w_bar < min_pixels) {
    const double beta = std::sqrt(static_cast<double>(min_pixels) / (h * w));
    h_bar = detail::scaled_up_side(height, beta, factor);
    w_bar = detail::scaled_up_side(width, beta, factor);
  }
  return std::make_pair(h_bar, w_bar);
}

core::Expected<ProcessedImage> process_image(const uint8_t* rgb, int32_t width, int32_t height,
                                             const ImageProcessorConfig& cfg, int num_threads) {
  LOOM_RETURN_IF_ERROR(cfg.validate());
  if (rgb == nullptr || width <= 0 || height <= 0)
    return core::invalid_argument("process_image: empty image " + std::to_string(width) + "x" +
                                  std::to_string(height));
  const int64_t factor = cfg.factor();
  int64_t out_h = height;
  int64_t out_w = width;
  if (cfg.do_resize) {
    LOOM_ASSIGN_OR_RETURN(auto hw, smart_resize(height, width, factor, cfg.min_pixels, cfg.max_pixels));
    out_h = hw.first;
    out_w = hw.second;
    if (out_h > (1 << 15) || out_w > (1 << 15))
      return core::out_of_range("process_image: resized image " + std::to_string(out_w) + "x" +
                                std::to_string(out_h) + " is too large");
  } else if (out_h % factor != 0 || out_w % factor != 0) {
    return core::invalid_argument("process_image: with do_resize=false the image sides (" +
                                  std::to_string(width) + "x" + std::to_string(height) +
                                  ") must be multiples of " + std::to_string(factor));
  }

  // image: [out_h][out_w][3] uint8. torchvision returns the input untouched when the size is unchanged.
  std::vector<uint8_t> resized;
  const uint8_t* image = rgb;
  if (out_h != height || out_w != width) {
    resized = resize_bicubic_aa_u8(rgb, width, height, 3, static_cast<int32_t>(out_w),
                                   static_cast<int32_t>(out_h), num_threads);
    image = resized.data();
  }

  // Per-channel affine map, computed in f32 exactly as transformers' fused path does:
  // normalize+rescale: (x - mean * (1/rescale)) / (std * (1/rescale)); rescale only: x * rescale.
  std::array<float, 3> sub{0.f, 0.f, 0.f};
  std::array<float, 3> div{1.f, 1.f, 1.f};
  float mul = 1.0f;
  if (cfg.do_normalize) {
    const float inv = cfg.do_rescale ? static_cast<float>(1.0 / cfg.rescale_factor) : 1.0f;
    for (int c = 0; c < 3; ++c) {
      sub[c] = cfg.do_rescale ? cfg.image_mean[c] * inv : cfg.image_mean[c];
      div[c] = cfg.do_rescale ? cfg.image_std[c] * inv : cfg.image_std[c];
    }
  } else if (cfg.do_rescale) {
    mul = static_cast<float>(cfg.rescale_factor);
  }
  // The value depends only on the uint8 input and the channel: one table per channel, filled with
  // the same f32 expression, gives the same bits as computing it per pixel.
  std::array<std::array<float, 256>, 3> lut{};
  for (int c = 0; c < 3; ++c)
    for (int x = 0; x < 256; ++x)
      lut[c][x] = cfg.do_normalize ? (static_cast<float>(x) - sub[c]) / div[c] : static_cast<float>(x) * mul;

  const int64_t p = cfg.patch_size;
  const int64_t m = cfg.merge_size;
  const int64_t t_len = cfg.temporal_patch_size;
  const int64_t grid_h = out_h / p;
  const int64_t grid_w = out_w / p;
  const int64_t rows = grid_h * grid_w;
  const int64_t cols = 3 * t_len * p * p;
  ProcessedImage out;
  out.pixel_values = core::Tensor::empty({rows, cols}, core::DType::kF32);
  out.grid_thw = {1, grid_h, grid_w};
  out.merge_size = m;
  float* dst = out.pixel_values.data_as<float>();
  const int64_t blocks_w = grid_w / m;

  parallel_for_rows(rows, num_threads, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      // r = ((bh * blocks_w + bw) * m + mh) * m + mw
      const int64_t mw = r % m;
      const int64_t mh = (r / m) % m;
      const int64_t block = r / (m * m);
      const int64_t bw = block % blocks_w;
      const int64_t bh = block / blocks_w;
      const int64_t y0 = (bh * m + mh) * p;
      const int64_t x0 = (bw * m + mw) * p;
      float* row = dst + r * cols;
      for (int64_t c = 0; c < 3; ++c) {
        float* frame0 = row + c * t_len * p * p;
        for (int64_t py = 0; py < p; ++py) {
          const uint8_t* src = image + ((y0 + py) * out_w + x0) * 3 + c;
          const float* table = lut[c].data();
          for (int64_t px = 0; px < p; ++px) frame0[py * p + px] = table[src[px * 3]];
        }
        // A still image fills every temporal slot with the same frame.
        for (int64_t t = 1; t < t_len; ++t) std::copy(frame0, frame0 + p * p, frame0 + t * p * p);
      }
    }
  });
  return out;
}

core::Expected<std::string> expand_placeholders(const std::string& text, const std::string& pad_token,
                                                const std::vector<int64_t>& counts) {
  if (pad_token.empty()) return core::invalid_argument("expand_placeholders: empty pad token");
  std::string out;
  size_t pos = 0;
  size_t index = 0;
  while (true) {
    const size_t hit = text.find(pad_token, pos);
    if (hit == std::string::npos) break;
    if (index >= counts.size())
      return core::invalid_argument("expand_placeholders: more \"" + pad_token +
                                    "\" in the prompt than the " + std::to_string(counts.size()) +
                                    " media items given");
    if (counts[index] < 0) return core::invalid_argument("expand_placeholders: negative token count");
    out.append(text, pos, hit - pos);
    for (int64_t k = 0; k < counts[index]; ++k) out += pad_token;
    ++index;
    pos = hit + pad_token.size();
  }
  if (index != counts.size())
    return core::invalid_argument("expand_placeholders: " + std::to_string(index) + " \"" + pad_token +
                                  "\" in the prompt for " + std::to_string(counts.size()) + " media items");
  out.append(text, pos, std::string::npos);
  return out;
}

core::Expected<std::vector<int32_t>> expand_placeholder_ids(const std::vector<int32_t>& ids, int32_t pad_id,
                                                            const std::vector<int64_t>& counts) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  size_t index = 0;
  for (int32_t id : ids) {
    if (id != pad_id) {
      out.push_back(id);
      continue;
    }
    if (index >= counts.size())
      return core::invalid_argument("expand_placeholder_ids: more pad tokens than the " +
                                    std::to_string(counts.size()) + " media items given");
    if (counts[index] < 0) return core::invalid_argument("expand_placeholder_ids: negative token count");
    out.insert(out.end(), static_cast<size_t>(counts[index]), pad_id);
    ++index;
  }
  if (index != counts.size())
    return core::invalid_argument("expand_placeholder_ids: " + std::to_string(index) + " pad tokens for " +
                                  std::to_string(counts.size()) + " media items");
  return out;
}

}  // namespace loom::models::qwen_vl
