#include "ops/reference_ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace loom::ops {

using core::DType;

namespace {

bool is_float_dtype(DType t) {
  return t == DType::kF32 || t == DType::kBF16 || t == DType::kF16;
}

// Element i of a f32/bf16/f16 buffer, exactly upcast.
float load_elem(const void* data, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(data)[i];
    case DType::kBF16: return core::bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::kF16: return core::f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    default: LOOM_CHECK(false) << "unsupported dtype " << core::dtype_name(t);
  }
  return 0.0f;
}

// Stores v rounded to the buffer's dtype (round-to-nearest-even).
void store_elem(void* data, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(data)[i] = v; return;
    case DType::kBF16: static_cast<uint16_t*>(data)[i] = core::f32_to_bf16(v); return;
    case DType::kF16: static_cast<uint16_t*>(data)[i] = core::f32_to_f16(v); return;
    default: LOOM_CHECK(false) << "unsupported dtype " << core::dtype_name(t);
  }
}

void check_cpu_f32(const Tensor& t, const char* what) {
  LOOM_CHECK(t.defined()) << what << " is undefined";
  LOOM_CHECK(t.device() == core::Device::kCpu) << what << " is not on the CPU";
  LOOM_CHECK(t.dtype() == DType::kF32) << what << " must be f32, got " << core::dtype_name(t.dtype());
}

void check_cpu_float(const Tensor& t, const char* what) {
  LOOM_CHECK(t.defined()) << what << " is undefined";
  LOOM_CHECK(t.device() == core::Device::kCpu) << what << " is not on the CPU";
  LOOM_CHECK(is_float_dtype(t.dtype()))
      << what << " must be f32/bf16/f16, got " << core::dtype_name(t.dtype());
}

// rms_norm of one row in double: y = weight * (x / sqrt(mean(x^2) + eps)).
void rms_norm_row(const float* x, const Tensor& weight, float eps, int64_t h, float* y) {
  double ss = 0.0;
  for (int64_t i = 0; i < h; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(h) + static_cast<double>(eps));
  for (int64_t i = 0; i < h; ++i) {
    const double w = load_elem(weight.data(), weight.dtype(), i);
    y[i] = static_cast<float>(w * (static_cast<double>(x[i]) * r));
  }
}

// GELU in double: the exact erf form or torch's tanh approximation.
double gelu_double(double v, bool tanh_approx) {
  if (tanh_approx) {
    const double k = std::sqrt(2.0 / 3.14159265358979323846);
    return 0.5 * v * (1.0 + std::tanh(k * (v + 0.044715 * v * v * v)));
  }
  return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)));
}

class ReferenceOps final : public Ops {
 public:
  const char* name() const override { return "reference"; }

  void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) override {
    const auto d = contract::check_embedding(table, ids, out);
    float* o = out.data_as<float>();
    for (int64_t t = 0; t < d.tokens; ++t)
      for (int64_t i = 0; i < d.hidden; ++i)
        o[t * d.hidden + i] = load_elem(table.data(), table.dtype(), int64_t{ids[t]} * d.hidden + i);
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override {
    const auto d = contract::check_linear(x, w, bias, y);
    const float* xp = x.data_as<float>();
    float* yp = y.data_as<float>();
    std::vector<double> wrow(static_cast<size_t>(d.k));
    for (int64_t n = 0; n < d.n; ++n) {
      for (int64_t k = 0; k < d.k; ++k) wrow[k] = load_elem(w.data(), w.dtype(), n * d.k + k);
      const double b = bias.defined() ? load_elem(bias.data(), bias.dtype(), n) : 0.0;
      for (int64_t m = 0; m < d.m; ++m) {
        double acc = 0.0;
        for (int64_t k = 0; k < d.k; ++k) acc += static_cast<double>(xp[m * d.k + k]) * wrow[k];
        yp[m * d.n + n] = static_cast<float>(acc + b);
      }
    }
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) override {
    const auto d = contract::check_rms_norm(x, weight, y);
    std::vector<float> row(static_cast<size_t>(d.hidden));  // y may alias x
    for (int64_t r = 0; r < d.rows; ++r) {
      const float* xr = x.data_as<float>() + r * d.hidden;
      row.assign(xr, xr + d.hidden);
      rms_norm_row(row.data(), weight, eps, d.hidden, y.data_as<float>() + r * d.hidden);
    }
  }

  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& y) override {
    const auto d = contract::check_add_rms_norm(residual, x, weight, y);
    for (int64_t r = 0; r < d.rows; ++r) {
      float* res = residual.data_as<float>() + r * d.hidden;
      const float* xr = x.data_as<float>() + r * d.hidden;
      for (int64_t i = 0; i < d.hidden; ++i) res[i] += xr[i];  // f32 add, as torch does
      rms_norm_row(res, weight, eps, d.hidden, y.data_as<float>() + r * d.hidden);
    }
  }

  void rope(Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
            const RopeParams& p) override {
    const auto d = contract::check_rope(x, positions, cos, sin, p);
    float* xp = x.data_as<float>();
    for (int64_t t = 0; t < d.tokens; ++t) {
      const float* c = cos.data_as<float>() + int64_t{positions[t]} * d.half;
      const float* s = sin.data_as<float>() + int64_t{positions[t]} * d.half;
      for (int64_t h = 0; h < d.heads; ++h) {
        float* v = xp + (t * d.heads + h) * d.head_dim;
        for (int64_t i = 0; i < d.half; ++i) {
          const double a = v[i], b = v[i + d.half];
          v[i] = static_cast<float>(a * c[i] - b * s[i]);
          v[i + d.half] = static_cast<float>(b * c[i] + a * s[i]);
        }
      }
    }
  }

  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) override {
    const auto d = contract::check_layer_norm(x, weight, bias, y);
    std::vector<double> row(static_cast<size_t>(d.hidden));  // y may alias x
    for (int64_t r = 0; r < d.rows; ++r) {
      const float* xr = x.data_as<float>() + r * d.hidden;
      double mean = 0.0;
      for (int64_t i = 0; i < d.hidden; ++i) mean += row[i] = xr[i];
      mean /= static_cast<double>(d.hidden);
      double var = 0.0;
      for (int64_t i = 0; i < d.hidden; ++i) var += (row[i] - mean) * (row[i] - mean);
      const double inv = 1.0 / std::sqrt(var / static_cast<double>(d.hidden) + static_cast<double>(eps));
      float* yr = y.data_as<float>() + r * d.hidden;
      for (int64_t i = 0; i < d.hidden; ++i) {
        const double w = load_elem(weight.data(), weight.dtype(), i);
        const double b = bias.defined() ? load_elem(bias.data(), bias.dtype(), i) : 0.0;
        yr[i] = static_cast<float>((row[i] - mean) * inv * w + b);
      }
    }
  }

  void gelu(const Tensor& x, Tensor& y, bool tanh_approx) override {
    const int64_t n = contract::check_gelu(x, y);
    for (int64_t i = 0; i < n; ++i)
      y.data_as<float>()[i] = static_cast<float>(gelu_double(x.data_as<float>()[i], tanh_approx));
  }

  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    const auto d = contract::check_silu_mul(gate_up, out);
    for (int64_t t = 0; t < d.tokens; ++t) {
      const float* g = gate_up.data_as<float>() + t * 2 * d.inter;
      const float* u = g + d.inter;
      float* o = out.data_as<float>() + t * d.inter;
      for (int64_t i = 0; i < d.inter; ++i) {
        const double gv = g[i];
        o[i] = static_cast<float>(gv / (1.0 + std::exp(-gv)) * u[i]);
      }
    }
  }

  void add_inplace(Tensor& a, const Tensor& b) override {
    const int64_t n = contract::check_add_inplace(a, b);
    for (int64_t i = 0; i < n; ++i) a.data_as<float>()[i] += b.data_as<float>()[i];
  }

  void write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping, Tensor& k_cache,
                Tensor& v_cache) override {
    const auto d = contract::check_write_kv(k, v, slot_mapping, k_cache, v_cache);
    const int64_t row = d.kv_heads * d.head_dim;
    for (int64_t t = 0; t < d.tokens; ++t) {
      const int64_t base = int64_t{slot_mapping[t]} * row;
      for (int64_t i = 0; i < row; ++i) {
        store_elem(k_cache.data(), k_cache.dtype(), base + i, k.data_as<float>()[t * row + i]);
        store_elem(v_cache.data(), v_cache.dtype(), base + i, v.data_as<float>()[t * row + i]);
      }
    }
  }

  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const PagedAttentionParams& p, Tensor& out) override {
    const auto d = contract::check_paged_attention(q, k_cache, v_cache, p, out);
    const int64_t group = d.q_heads / d.kv_heads;
    // Upcast the caches once (exact); the loops below then read plain floats.
    const Tensor kf = k_cache.to_f32(), vf = v_cache.to_f32();
    const float* kp = kf.data_as<float>();
    const float* vp = vf.data_as<float>();
    std::vector<double> scores, acc(static_cast<size_t>(d.head_dim));
    for (int64_t s = 0; s < d.num_seqs; ++s) {
      const int64_t q_begin = p.q_indptr[s], q_len = p.q_indptr[s + 1] - q_begin;
      const int64_t kv_len = p.kv_lens[s];
      const int32_t* table = p.block_table.data() + s * p.max_blocks_per_seq;
      // Element offset of (context token t, kv head g, dim 0) in the caches.
      auto kv_offset = [&](int64_t t, int64_t g) {
        const int64_t slot = int64_t{table[t / p.block_size]} * p.block_size + t % p.block_size;
        return (slot * d.kv_heads + g) * d.head_dim;
      };
      for (int64_t i = 0; i < q_len; ++i) {
        const int64_t qpos = kv_len - q_len + i;
        const int64_t hi = p.causal ? qpos : kv_len - 1;  // last visible key
        const int64_t lo = p.sliding_window > 0 ? std::max<int64_t>(0, qpos - p.sliding_window + 1) : 0;
        for (int64_t h = 0; h < d.q_heads; ++h) {
          const int64_t g = h / group;
          const float* qv = q.data_as<float>() + ((q_begin + i) * d.q_heads + h) * d.head_dim;
          scores.assign(static_cast<size_t>(hi - lo + 1), 0.0);
          double mx = -std::numeric_limits<double>::infinity();
          for (int64_t t = lo; t <= hi; ++t) {
            const int64_t off = kv_offset(t, g);
            double dot = 0.0;
            for (int64_t e = 0; e < d.head_dim; ++e) dot += double{qv[e]} * kp[off + e];
            scores[t - lo] = dot * p.scale;
            mx = std::max(mx, scores[t - lo]);
          }
          double sum = 0.0;
          for (double& sc : scores) {
            sc = std::exp(sc - mx);
            sum += sc;
          }
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t t = lo; t <= hi; ++t) {
            const int64_t off = kv_offset(t, g);
            for (int64_t e = 0; e < d.head_dim; ++e) acc[e] += scores[t - lo] * vp[off + e];
          }
          float* o = out.data_as<float>() + ((q_begin + i) * d.q_heads + h) * d.head_dim;
          for (int64_t e = 0; e < d.head_dim; ++e) o[e] = static_cast<float>(acc[e] / sum);
        }
      }
    }
  }
};

}  // namespace

std::unique_ptr<Ops> make_reference_ops() {
  return std::make_unique<ReferenceOps>();
}

namespace contract {

LinearDims check_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y) {
  check_cpu_f32(x, "linear x");
  check_cpu_float(w, "linear w");
  check_cpu_f32(y, "linear y");
  LOOM_CHECK(x.rank() == 2 && w.rank() == 2 && y.rank() == 2)
      << "linear wants x [M, K], w [N, K], y [M, N]; got " << core::shape_to_string(x.shape()) << ", "
      << core::shape_to_string(w.shape()) << ", " << core::shape_to_string(y.shape());
  LinearDims d{x.dim(0), x.dim(1), w.dim(0)};
  LOOM_CHECK(w.dim(1) == d.k && y.dim(0) == d.m && y.dim(1) == d.n)
      << "linear shapes x " << core::shape_to_string(x.shape()) << " w " << core::shape_to_string(w.shape())
      << " y " << core::shape_to_string(y.shape());
  if (bias.defined()) {
    check_cpu_float(bias, "linear bias");
    LOOM_CHECK(bias.numel() == d.n) << "linear bias has " << bias.numel() << " elements, want " << d.n;
  }
  return d;
}

RowDims check_rms_norm(const Tensor& x, const Tensor& weight, const Tensor& y) {
  check_cpu_f32(x, "rms_norm x");
  check_cpu_float(weight, "rms_norm weight");
  check_cpu_f32(y, "rms_norm y");
  LOOM_CHECK(x.rank() >= 1 && x.dim(-1) == weight.numel() && y.numel() == x.numel() && y.dim(-1) == x.dim(-1))
      << "rms_norm x " << core::shape_to_string(x.shape()) << " weight "
      << core::shape_to_string(weight.shape()) << " y " << core::shape_to_string(y.shape());
  RowDims d;
  d.hidden = x.dim(-1);
  d.rows = d.hidden == 0 ? 0 : x.numel() / d.hidden;
  return d;
}

RowDims check_add_rms_norm(const Tensor& residual, const Tensor& x, const Tensor& weight, const Tensor& y) {
  check_cpu_f32(residual, "add_rms_norm residual");
  check_cpu_f32(x, "add_rms_norm x");
  LOOM_CHECK(x.numel() == residual.numel() && x.rank() >= 1 && x.dim(-1) == residual.dim(-1))
      << "add_rms_norm residual " << core::shape_to_string(residual.shape()) << " x "
      << core::shape_to_string(x.shape());
  LOOM_CHECK(y.data() != residual.data() || residual.numel() == 0)
      << "add_rms_norm: y must not alias residual";
  return check_rms_norm(residual, weight, y);
}

EmbeddingDims check_embedding(const Tensor& table, std::span<const int32_t> ids, const Tensor& out) {
  check_cpu_float(table, "embedding table");
  check_cpu_f32(out, "embedding out");
  LOOM_CHECK(table.rank() == 2 && out.rank() == 2 && out.dim(1) == table.dim(1) &&
             out.dim(0) == static_cast<int64_t>(ids.size()))
      << "embedding table " << core::shape_to_string(table.shape()) << " out "
      << core::shape_to_string(out.shape()) << " ids " << ids.size();
  EmbeddingDims d{static_cast<int64_t>(ids.size()), table.dim(0), table.dim(1)};
  for (int32_t id : ids) LOOM_CHECK(id >= 0 && id < d.vocab) << "embedding id " << id << " of " << d.vocab;
  return d;
}

RopeDims check_rope(const Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
                    const RopeParams& p) {
  check_cpu_f32(x, "rope x");
  check_cpu_f32(cos, "rope cos");
  check_cpu_f32(sin, "rope sin");
  LOOM_CHECK(x.rank() == 3 && x.dim(0) == static_cast<int64_t>(positions.size()))
      << "rope x " << core::shape_to_string(x.shape()) << " with " << positions.size() << " positions";
  RopeDims d{x.dim(0), x.dim(1), x.dim(2), p.rotary_dim / 2, cos.rank() == 2 ? cos.dim(0) : 0};
  LOOM_CHECK(p.rotary_dim > 0 && p.rotary_dim % 2 == 0 && p.rotary_dim <= d.head_dim)
      << "rope rotary_dim " << p.rotary_dim << " with head_dim " << d.head_dim;
  LOOM_CHECK(cos.rank() == 2 && cos.dim(1) == d.half && sin.shape() == cos.shape())
      << "rope tables cos " << core::shape_to_string(cos.shape()) << " sin "
      << core::shape_to_string(sin.shape()) << " want [max_pos, " << d.half << "]";
  for (int32_t pos : positions)
    LOOM_CHECK(pos >= 0 && pos < d.max_positions) << "rope position " << pos << " of " << d.max_positions;
  return d;
}

RowDims check_layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y) {
  check_cpu_f32(x, "layer_norm x");
  check_cpu_float(weight, "layer_norm weight");
  check_cpu_f32(y, "layer_norm y");
  LOOM_CHECK(x.rank() >= 1 && x.dim(-1) == weight.numel() && y.numel() == x.numel() && y.dim(-1) == x.dim(-1))
      << "layer_norm x " << core::shape_to_string(x.shape()) << " weight "
      << core::shape_to_string(weight.shape()) << " y " << core::shape_to_string(y.shape());
  if (bias.defined()) {
    check_cpu_float(bias, "layer_norm bias");
    LOOM_CHECK(bias.numel() == weight.numel())
        << "layer_norm bias has " << bias.numel() << " elements, want " << weight.numel();
  }
  RowDims d;
  d.hidden = x.dim(-1);
  d.rows = d.hidden == 0 ? 0 : x.numel() / d.hidden;
  return d;
}

int64_t check_gelu(const Tensor& x, const Tensor& y) {
  check_cpu_f32(x, "gelu x");
  check_cpu_f32(y, "gelu y");
  LOOM_CHECK(x.numel() == y.numel()) << "gelu x " << core::shape_to_string(x.shape()) << " y "
                                     << core::shape_to_string(y.shape());
  return x.numel();
}

SiluMulDims check_silu_mul(const Tensor& gate_up, const Tensor& out) {
  check_cpu_f32(gate_up, "silu_mul gate_up");
  check_cpu_f32(out, "silu_mul out");
  LOOM_CHECK(gate_up.rank() == 2 && out.rank() == 2 && gate_up.dim(0) == out.dim(0) &&
             gate_up.dim(1) == 2 * out.dim(1))
      << "silu_mul gate_up " << core::shape_to_string(gate_up.shape()) << " out "
      << core::shape_to_string(out.shape());
  return {out.dim(0), out.dim(1)};
}

int64_t check_add_inplace(const Tensor& a, const Tensor& b) {
  check_cpu_f32(a, "add_inplace a");
  check_cpu_f32(b, "add_inplace b");
  LOOM_CHECK(a.shape() == b.shape()) << "add_inplace a " << core::shape_to_string(a.shape()) << " b "
                                     << core::shape_to_string(b.shape());
  return a.numel();
}

KvDims check_write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping,
                      const Tensor& k_cache, const Tensor& v_cache) {
  check_cpu_f32(k, "write_kv k");
  check_cpu_f32(v, "write_kv v");
  check_cpu_float(k_cache, "k_cache");
  check_cpu_float(v_cache, "v_cache");
  LOOM_CHECK(k.rank() == 3 && k.shape() == v.shape() && k.dim(0) == static_cast<int64_t>(slot_mapping.size()))
      << "write_kv k " << core::shape_to_string(k.shape()) << " v " << core::shape_to_string(v.shape())
      << " slots " << slot_mapping.size();
  LOOM_CHECK(k_cache.rank() == 4 && k_cache.shape() == v_cache.shape() &&
             k_cache.dtype() == v_cache.dtype() && k_cache.dim(2) == k.dim(1) && k_cache.dim(3) == k.dim(2))
      << "write_kv caches " << core::shape_to_string(k_cache.shape()) << " / "
      << core::shape_to_string(v_cache.shape()) << " for rows " << core::shape_to_string(k.shape());
  KvDims d{k.dim(0), k.dim(1), k.dim(2), k_cache.dim(0), k_cache.dim(1)};
  const int64_t slots = d.num_blocks * d.block_size;
  for (int32_t s : slot_mapping) LOOM_CHECK(s >= 0 && s < slots) << "write_kv slot " << s << " of " << slots;
  return d;
}

AttentionDims check_paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                    const PagedAttentionParams& p, const Tensor& out) {
  check_cpu_f32(q, "attention q");
  check_cpu_f32(out, "attention out");
  check_cpu_float(k_cache, "k_cache");
  check_cpu_float(v_cache, "v_cache");
  LOOM_CHECK(q.rank() == 3 && out.shape() == q.shape())
      << "attention q " << core::shape_to_string(q.shape()) << " out " << core::shape_to_string(out.shape());
  LOOM_CHECK(k_cache.rank() == 4 && k_cache.shape() == v_cache.shape() &&
             k_cache.dtype() == v_cache.dtype() && k_cache.dim(3) == q.dim(2) &&
             k_cache.dim(1) == p.block_size)
      << "attention caches " << core::shape_to_string(k_cache.shape()) << " / "
      << core::shape_to_string(v_cache.shape()) << " q " << core::shape_to_string(q.shape()) << " block_size "
      << p.block_size;
  AttentionDims d;
  d.tokens = q.dim(0);
  d.q_heads = q.dim(1);
  d.head_dim = q.dim(2);
  d.kv_heads = k_cache.dim(2);
  d.num_blocks = k_cache.dim(0);
  d.num_seqs = static_cast<int64_t>(p.kv_lens.size());
  LOOM_CHECK(d.kv_heads > 0 && d.q_heads % d.kv_heads == 0)
      << "attention q_heads " << d.q_heads << " not a multiple of kv_heads " << d.kv_heads;
  LOOM_CHECK(p.block_size > 0 && p.sliding_window >= 0 && p.max_blocks_per_seq >= 0)
      << "attention block_size " << p.block_size << " sliding_window " << p.sliding_window;
  LOOM_CHECK(static_cast<int64_t>(p.q_indptr.size()) == d.num_seqs + 1 && p.q_indptr[0] == 0 &&
             p.q_indptr[d.num_seqs] == d.tokens)
      << "attention q_indptr has " << p.q_indptr.size() << " entries for " << d.num_seqs << " sequences and "
      << d.tokens << " tokens";
  LOOM_CHECK(static_cast<int64_t>(p.block_table.size()) >= d.num_seqs * p.max_blocks_per_seq)
      << "attention block_table has " << p.block_table.size() << " entries, want " << d.num_seqs << " x "
      << p.max_blocks_per_seq;
  for (int64_t s = 0; s < d.num_seqs; ++s) {
    const int64_t q_len = p.q_indptr[s + 1] - p.q_indptr[s];
    const int64_t kv_len = p.kv_lens[s];
    LOOM_CHECK(q_len >= 0 && kv_len >= q_len && kv_len <= int64_t{p.max_blocks_per_seq} * p.block_size)
        << "attention sequence " << s << ": q_len " << q_len << " kv_len " << kv_len << " capacity "
        << int64_t{p.max_blocks_per_seq} * p.block_size;
    if (q_len == 0) continue;
    const int64_t used_blocks = (kv_len + p.block_size - 1) / p.block_size;
    for (int64_t b = 0; b < used_blocks; ++b) {
      const int32_t id = p.block_table[s * p.max_blocks_per_seq + b];
      LOOM_CHECK(id >= 0 && id < d.num_blocks)
          << "attention sequence " << s << " block " << b << " id " << id << " of " << d.num_blocks;
    }
  }
  return d;
}

}  // namespace contract
}  // namespace loom::ops
