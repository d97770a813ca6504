#include "models/qwen_omni/audio_features.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <filesystem>
#include <fstream>
#include <limits>
#include <numbers>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "models/qwen_vl/parallel_rows_inl.h"

namespace loom::models::qwen_omni {
namespace {

using Json = nlohmann::json;
using cd = std::complex<double>;

// ---- config -------------------------------------------------------------------------------------

core::Status read_int(const Json& j, const char* key, const std::string& origin, int32_t* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return core::Status::ok_status();
  if (!it->is_number_integer() &&
      !(it->is_number_float() && std::floor(it->get<double>()) == it->get<double>()))
    return core::invalid_argument(origin + ": \"" + key + "\" must be an integer");
  const double v = it->get<double>();
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    return core::invalid_argument(origin + ": \"" + key + "\" out of range");
  *out = static_cast<int32_t>(v);
  return core::Status::ok_status();
}

core::Status read_double(const Json& j, const char* key, const std::string& origin, double* out) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return core::Status::ok_status();
  if (!it->is_number()) return core::invalid_argument(origin + ": \"" + key + "\" must be a number");
  *out = it->get<double>();
  return core::Status::ok_status();
}

core::Expected<WhisperFeatureConfig> from_json(const Json& j, const std::string& origin) {
  if (!j.is_object()) return core::invalid_argument(origin + ": feature extractor config is not an object");
  if (auto it = j.find("feature_extractor_type"); it != j.end() && it->is_string()) {
    if (it->get<std::string>() != "WhisperFeatureExtractor")
      return core::unsupported(origin + ": feature_extractor_type " + it->get<std::string>() +
                               " (only WhisperFeatureExtractor)");
  }
  WhisperFeatureConfig c;
  // WhisperFeatureExtractor.__init__ defaults for absent keys.
  c.feature_size = 80;
  c.chunk_length = 30;
  LOOM_RETURN_IF_ERROR(read_int(j, "feature_size", origin, &c.feature_size));
  LOOM_RETURN_IF_ERROR(read_int(j, "sampling_rate", origin, &c.sampling_rate));
  LOOM_RETURN_IF_ERROR(read_int(j, "hop_length", origin, &c.hop_length));
  LOOM_RETURN_IF_ERROR(read_int(j, "n_fft", origin, &c.n_fft));
  LOOM_RETURN_IF_ERROR(read_int(j, "chunk_length", origin, &c.chunk_length));
  LOOM_RETURN_IF_ERROR(read_double(j, "padding_value", origin, &c.padding_value));
  LOOM_RETURN_IF_ERROR(read_double(j, "dither", origin, &c.dither));
  // "n_samples" / "nb_max_frames" in the file are ignored by transformers (recomputed from
  // chunk_length in __init__); we do the same.
  if (auto st = c.validate(); !st.ok()) return st.with_context(origin);
  return c;
}

core::Expected<std::string> read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return core::io_error(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) return core::io_error(p.string() + ": read failed");
  return ss.str();
}

// ---- FFT ----------------------------------------------------------------------------------------

// Mixed-radix (2, 3, 4, 5, 7) decimation-in-time complex FFT of one fixed size, in double.
// n_fft = 400 = 4 * 4 * 5 * 5: about 18 complex multiply-adds per sample per transform. Complex
// products are written out: std::complex's operator* calls __muldc3 (NaN/inf recovery) at -O2.
class Fft {
 public:
  explicit Fft(int n) : n_(n) {
    int m = n;
    for (int p : {4, 2, 3, 5, 7}) {
      while (m % p == 0) {
        factors_.push_back(p);
        m /= p;
      }
    }
    LOOM_CHECK(m == 1) << "FFT size " << n << " has a prime factor above 7";
    // Per level (sub-size len = p * m): twiddles W_len^(r k1), r = 1..p-1, k1 = 0..m-1, and the
    // radix-p DFT matrix W_p^(r k2).
    int len = n;
    for (int p : factors_) {
      const int sub = len / p;
      Level lv;
      lv.tw.resize(static_cast<size_t>((p - 1) * sub));
      for (int r = 1; r < p; ++r)
        for (int k1 = 0; k1 < sub; ++k1)
          lv.tw[static_cast<size_t>((r - 1) * sub + k1)] = unit(static_cast<double>(r) * k1 / len);
      lv.dft.resize(static_cast<size_t>(p * p));
      for (int k2 = 0; k2 < p; ++k2)
        for (int r = 0; r < p; ++r)
          lv.dft[static_cast<size_t>(k2 * p + r)] = unit(static_cast<double>((r * k2) % p) / p);
      levels_.push_back(std::move(lv));
      len = sub;
    }
  }
  int size() const { return n_; }
  // out[k] = sum_j in[j] exp(-2 pi i j k / n); in and out have n entries.
  void run(const cd* in, cd* out) const { rec(in, 1, out, n_, 0); }

 private:
  struct Level {
    std::vector<cd> tw;
    std::vector<cd> dft;
  };
  static cd unit(double frac) {
    const double a = -2.0 * std::numbers::pi * frac;
    return {std::cos(a), std::sin(a)};
  }
  static cd mul(cd a, cd b) {
    return {a.real() * b.real() - a.imag() * b.imag(), a.real() * b.imag() + a.imag() * b.real()};
  }

  void rec(const cd* in, int64_t stride, cd* out, int n, size_t level) const {
    if (n == 1) {  // only when the whole transform has size 1
      out[0] = in[0];
      return;
    }
    const int p = factors_[level];
    const int m = n / p;
    const Level& lv = levels_[level];
    cd v[7];
    if (m == 1) {  // last level: a plain radix-p DFT of the strided input, no twiddles
      for (int r = 0; r < p; ++r) v[r] = in[r * stride];
      butterfly(p, v, lv, out, 1);
      return;
    }
    // Sub-transforms Y_r (r = 0..p-1) of x[r + p j] into out[r m .. r m + m).
    for (int r = 0; r < p; ++r) rec(in + r * stride, stride * p, out + r * m, m, level + 1);
    for (int k1 = 0; k1 < m; ++k1) {
      v[0] = out[k1];
      for (int r = 1; r < p; ++r) v[r] = mul(out[r * m + k1], lv.tw[static_cast<size_t>((r - 1) * m + k1)]);
      // X[k1 + m k2] = sum_r v_r W_p^(r k2): the same positions as the v_r, so in place.
      butterfly(p, v, lv, out + k1, m);
    }
  }

  // out[k2 m] = sum_r v_r W_p^(r k2) for k2 = 0..p-1.
  static void butterfly(int p, const cd* v, const Level& lv, cd* out, int m) {
    if (p == 4) {
      const cd a = v[0] + v[2], b = v[0] - v[2], c = v[1] + v[3];
      const cd d0 = v[1] - v[3];
      const cd d(d0.imag(), -d0.real());  // * -i
      out[0] = a + c;
      out[m] = b + d;
      out[2 * m] = a - c;
      out[3 * m] = b - d;
    } else if (p == 2) {
      out[0] = v[0] + v[1];
      out[m] = v[0] - v[1];
    } else if (p == 5) {
      radix<5>(v, lv.dft.data(), out, m);
    } else if (p == 3) {
      radix<3>(v, lv.dft.data(), out, m);
    } else {
      radix<7>(v, lv.dft.data(), out, m);
    }
  }

  // out[k2 m] = sum_r v_r W_p^(r k2), with P known at compile time so the loops unroll.
  template <int P>
  static void radix(const cd* v, const cd* dft, cd* out, int m) {
    for (int k2 = 0; k2 < P; ++k2) {
      const cd* row = dft + k2 * P;
      double re = v[0].real(), im = v[0].imag();
      for (int r = 1; r < P; ++r) {
        re += v[r].real() * row[r].real() - v[r].imag() * row[r].imag();
        im += v[r].real() * row[r].imag() + v[r].imag() * row[r].real();
      }
      out[k2 * m] = cd(re, im);
    }
  }

  int n_;
  std::vector<int> factors_;
  std::vector<Level> levels_;
};

// Spectrum bins 0..n/2 of a real signal of even length n through one complex FFT of n/2 points:
// z_j = x_2j + i x_2j+1, Z = FFT(z); X_k = (Z_k + conj Z_(n/2-k)) / 2 - i W_n^k (Z_k - conj Z_(n/2-k)) / 2.
class RealFft {
 public:
  explicit RealFft(int n) : n_(n), half_(n / 2) {
    LOOM_CHECK(n % 2 == 0) << "real FFT size must be even: " << n;
    tw_.resize(static_cast<size_t>(half_ + 1));
    for (int k = 0; k <= half_; ++k) {
      const double a = -2.0 * std::numbers::pi * k / n;
      tw_[static_cast<size_t>(k)] = cd(std::cos(a), std::sin(a));
    }
  }
  // x: n real samples; z, zf: n/2 scratch each; power: n/2 + 1 outputs |X_k|^2.
  void power(const double* x, cd* z, cd* zf, double* power) const {
    for (int j = 0; j < half_; ++j) z[j] = cd(x[2 * j], x[2 * j + 1]);
    fft_.run(z, zf);
    for (int k = 0; k <= half_; ++k) {
      const cd a = zf[k % half_];
      const cd b = std::conj(zf[(half_ - k) % half_]);
      const cd e = (a + b) * 0.5;
      const cd o0 = (a - b) * 0.5;
      const cd o(o0.imag(), -o0.real());  // -i (a - b) / 2
      const cd w = tw_[static_cast<size_t>(k)];
      const double re = e.real() + (o.real() * w.real() - o.imag() * w.imag());
      const double im = e.imag() + (o.real() * w.imag() + o.imag() * w.real());
      power[k] = re * re + im * im;
    }
  }

 private:
  int n_;
  int half_;
  Fft fft_{half_};
  std::vector<cd> tw_;
};

double floor_div(int64_t a, int64_t b) {
  return std::floor(static_cast<double>(a) / static_cast<double>(b));
}

double hz_to_mel_slaney(double f) {
  const double logstep = 27.0 / std::log(6.4);
  if (f >= 1000.0) return 15.0 + std::log(f / 1000.0) * logstep;
  return 3.0 * f / 200.0;
}

double mel_to_hz_slaney(double m) {
  const double logstep = std::log(6.4) / 27.0;
  if (m >= 15.0) return 1000.0 * std::exp(logstep * (m - 15.0));
  return 200.0 * m / 3.0;
}

}  // namespace

core::Status WhisperFeatureConfig::validate() const {
  if (feature_size < 1 || sampling_rate < 1 || hop_length < 1 || n_fft < 2 || chunk_length < 1)
    return core::invalid_argument(
        "feature_size, sampling_rate, hop_length, n_fft and chunk_length must be positive (n_fft >= 2)");
  if (n_samples() <= n_fft / 2)
    return core::invalid_argument("chunk_length * sampling_rate must exceed n_fft / 2 (reflect padding)");
  if (dither != 0.0)
    return core::unsupported("dither != 0 adds random noise to the features; only dither 0 is reproducible");
  if (padding_value != 0.0) return core::unsupported("padding_value != 0 (only silence padding)");
  if (n_fft % 2 != 0) return core::unsupported("odd n_fft " + std::to_string(n_fft));
  int m = n_fft;
  for (int p : {2, 3, 5, 7})
    while (m % p == 0) m /= p;
  if (m != 1) return core::unsupported("n_fft " + std::to_string(n_fft) + " has a prime factor above 7");
  if (feature_size > n_fft / 2 + 1) return core::unsupported("feature_size above n_fft / 2 + 1");
  return core::Status::ok_status();
}

core::Expected<WhisperFeatureConfig> parse_whisper_feature_config(const std::string& json_text,
                                                                  const std::string& origin) {
  Json j = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return core::invalid_argument(origin + ": not valid JSON");
  return from_json(j, origin);
}

core::Expected<WhisperFeatureConfig> load_whisper_feature_config(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  const fs::path nested = dir / "processor_config.json";
  if (fs::exists(nested)) {
    LOOM_ASSIGN_OR_RETURN(std::string text, read_text(nested));
    Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return core::invalid_argument(nested.string() + ": not valid JSON");
    if (j.is_object()) {
      if (auto it = j.find("feature_extractor"); it != j.end()) return from_json(*it, nested.string());
    }
  }
  const fs::path legacy = dir / "preprocessor_config.json";
  if (!fs::exists(legacy))
    return core::not_found(
        model_dir + ": no preprocessor_config.json and no \"feature_extractor\" in processor_config.json");
  LOOM_ASSIGN_OR_RETURN(std::string text, read_text(legacy));
  return parse_whisper_feature_config(text, legacy.string());
}

int64_t valid_mel_frames(int64_t num_samples, const WhisperFeatureConfig& cfg) {
  if (num_samples <= 0) return 0;
  const int64_t used = std::min(num_samples, cfg.n_samples());
  return std::min((used + cfg.hop_length - 1) / cfg.hop_length, cfg.max_frames());
}

int64_t audio_token_count(int64_t mel_frames) {
  const auto a = static_cast<int64_t>(floor_div(mel_frames - 1, 2)) + 1;
  return static_cast<int64_t>(floor_div(a - 2, 2)) + 1;
}

std::vector<double> slaney_mel_filters(const WhisperFeatureConfig& cfg) {
  const int bins = cfg.n_fft / 2 + 1;
  const int mels = cfg.feature_size;
  // np.linspace(mel_min, mel_max, mels + 2): start + i * step, last element exactly stop.
  const double mel_min = hz_to_mel_slaney(0.0), mel_max = hz_to_mel_slaney(8000.0);
  const int count = mels + 2;
  const double step = (mel_max - mel_min) / (count - 1);
  std::vector<double> filter_freqs(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) filter_freqs[static_cast<size_t>(i)] = mel_to_hz_slaney(mel_min + i * step);
  filter_freqs.back() = mel_to_hz_slaney(mel_max);
  // fft_freqs = np.linspace(0, sampling_rate // 2, bins)
  const double f_stop = static_cast<double>(cfg.sampling_rate / 2);
  const double f_step = f_stop / (bins - 1);
  std::vector<double> out(static_cast<size_t>(bins) * mels);
  for (int k = 0; k < bins; ++k) {
    const double f = k == bins - 1 ? f_stop : k * f_step;
    for (int m = 0; m < mels; ++m) {
      const double* ff = filter_freqs.data() + m;
      const double down = -(ff[0] - f) / (ff[1] - ff[0]);
      const double up = (ff[2] - f) / (ff[2] - ff[1]);
      const double tri = std::max(0.0, std::min(down, up));
      const double enorm = 2.0 / (ff[2] - ff[0]);
      out[static_cast<size_t>(k) * mels + m] = tri * enorm;
    }
  }
  return out;
}

core::Expected<LogMel> log_mel(std::span<const float> pcm, const WhisperFeatureConfig& cfg, int num_threads) {
  LOOM_RETURN_IF_ERROR(cfg.validate());
  const int64_t n_total = cfg.n_samples();  // length of transformers' padded signal
  const int64_t used = std::min<int64_t>(static_cast<int64_t>(pcm.size()), n_total);
  const int64_t hop = cfg.hop_length;
  const int n_fft = cfg.n_fft;
  const int half = n_fft / 2;
  const int bins = half + 1;
  const int mels = cfg.feature_size;

  LogMel out;
  out.n_mels = mels;
  out.frames = valid_mel_frames(used, cfg);
  out.truncated = static_cast<int64_t>(pcm.size()) > n_total;
  // Frames past the valid ones whose windows still reach a signal sample take part in the global max
  // (transformers takes it over all padded frames; frames of pure padding are log10(1e-10) = -10,
  // the floor every value already has, so they never change it).
  int64_t max_frame = out.frames;
  while (max_frame < cfg.max_frames() && max_frame * hop - half < used) ++max_frame;

  // The padded signal with torch.stft's reflect padding at both ends of [0, n_total).
  auto sample = [&](int64_t i) -> double {
    if (i < 0) i = -i;
    if (i >= n_total) i = 2 * (n_total - 1) - i;
    return i < used ? static_cast<double>(pcm[static_cast<size_t>(i)]) : 0.0;
  };

  std::vector<double> window(static_cast<size_t>(n_fft));  // periodic Hann
  for (int j = 0; j < n_fft; ++j)
    window[static_cast<size_t>(j)] = 0.5 - 0.5 * std::cos(2.0 * std::numbers::pi * j / n_fft);
  const std::vector<double> filters = slaney_mel_filters(cfg);
  // Non-zero bin range of each filter: the triangles are narrow, so the mel product is ~bins*2.
  std::vector<int> lo(static_cast<size_t>(mels), bins), hi(static_cast<size_t>(mels), 0);
  for (int m = 0; m < mels; ++m)
    for (int k = 0; k < bins; ++k)
      if (filters[static_cast<size_t>(k) * mels + m] != 0.0) {
        lo[static_cast<size_t>(m)] = std::min(lo[static_cast<size_t>(m)], k);
        hi[static_cast<size_t>(m)] = k + 1;
      }
  const RealFft fft(n_fft);

  // log10 mel, [max_frame, mels] (frame-major while computing; transposed at the end).
  std::vector<double> logm(static_cast<size_t>(max_frame) * mels);
  qwen_vl::parallel_for_rows(max_frame, num_threads, [&](int64_t begin, int64_t end) {
    std::vector<double> in(static_cast<size_t>(n_fft));
    std::vector<cd> z(static_cast<size_t>(half)), zf(static_cast<size_t>(half));
    std::vector<double> power(static_cast<size_t>(bins));
    for (int64_t t = begin; t < end; ++t) {
      const int64_t start = t * hop - half;
      if (start >= 0 && start + n_fft <= used) {  // interior frame: no padding or reflection
        const float* src = pcm.data() + start;
        for (int j = 0; j < n_fft; ++j) in[static_cast<size_t>(j)] = src[j] * window[static_cast<size_t>(j)];
      } else {
        for (int j = 0; j < n_fft; ++j)
          in[static_cast<size_t>(j)] = sample(start + j) * window[static_cast<size_t>(j)];
      }
      fft.power(in.data(), z.data(), zf.data(), power.data());
      double* row = logm.data() + t * mels;
      for (int m = 0; m < mels; ++m) {
        double s = 0.0;
        for (int k = lo[static_cast<size_t>(m)]; k < hi[static_cast<size_t>(m)]; ++k)
          s += filters[static_cast<size_t>(k) * mels + m] * power[static_cast<size_t>(k)];
        row[m] = std::log10(std::max(s, 1e-10));
      }
    }
  });
  double gmax = -10.0;  // the floor; also the value of every frame of pure padding
  for (double v : logm) gmax = std::max(gmax, v);
  const double floor_v = gmax - 8.0;
  out.data.resize(static_cast<size_t>(mels) * out.frames);
  for (int64_t t = 0; t < out.frames; ++t)
    for (int m = 0; m < mels; ++m)
      out.data[static_cast<size_t>(m) * out.frames + t] =
          static_cast<float>((std::max(logm[static_cast<size_t>(t * mels + m)], floor_v) + 4.0) / 4.0);
  return out;
}

}  // namespace loom::models::qwen_omni
