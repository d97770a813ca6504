// CpuBackend: construction, helpers, and the elementwise ops (norms, rope, silu_mul, gelu,
// embedding, write_kv). Linear is in linear.cpp, attention in attention.cpp.
#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"

namespace loom::backends::cpu {

namespace {

// Below this many elements an elementwise op runs on the calling thread: waking the
// pool costs more than the work.
constexpr int64_t kParallelMinElems = 1 << 15;

}  // namespace

CpuBackend::CpuBackend(int num_threads, CpuIsa isa) : pool_(num_threads), kernels_(kernel_table(isa)) {
  LOOM_CHECK(kernels_ != nullptr) << "CPU ISA " << isa_name(isa) << " is not supported by this CPU or build";
  thread_scratch_.resize(static_cast<size_t>(pool_.num_threads()));
}

const float* CpuBackend::as_f32(const void* src, core::DType type, int64_t n, std::vector<float>& buf) {
  if (src == nullptr) return nullptr;
  if (type == core::DType::kF32) return static_cast<const float*>(src);
  buf.resize(static_cast<size_t>(n));
  kernels_->to_f32(src, type, buf.data(), n);
  return buf.data();
}

void CpuBackend::embedding(const void* table, core::DType table_type, int64_t hidden, const int32_t* ids,
                           int64_t tokens, float* out) {
  const size_t row_bytes = core::element_bytes(table_type, static_cast<size_t>(hidden));
  parallel_range(tokens, std::max<int64_t>(1, kParallelMinElems / std::max<int64_t>(hidden, 1)),
                 [&](int64_t t0, int64_t t1) {
                   for (int64_t t = t0; t < t1; ++t) {
                     const auto* row =
                         static_cast<const char*>(table) + static_cast<size_t>(ids[t]) * row_bytes;
                     kernels_->to_f32(row, table_type, out + t * hidden, hidden);
                   }
                 });
}

void CpuBackend::rms_norm(const float* x, const void* weight, core::DType weight_type, float eps,
                          int64_t rows, int64_t hidden, float* y) {
  const float* w = as_f32(weight, weight_type, hidden, norm_buf_);
  parallel_range(rows, std::max<int64_t>(1, kParallelMinElems / std::max<int64_t>(hidden, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r)
                     kernels_->rms_norm_row(x + r * hidden, w, eps, y + r * hidden, hidden);
                 });
}

void CpuBackend::add_rms_norm(float* residual, const float* x, const void* weight, core::DType weight_type,
                              float eps, int64_t rows, int64_t hidden, float* y) {
  const float* w = as_f32(weight, weight_type, hidden, norm_buf_);
  parallel_range(rows, std::max<int64_t>(1, kParallelMinElems / std::max<int64_t>(hidden, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r)
                     kernels_->add_rms_norm_row(residual + r * hidden, x + r * hidden, w, eps, y + r * hidden,
                                                hidden);
                 });
}

void CpuBackend::rope(float* x, int64_t tokens, int64_t heads, int64_t head_dim, const int32_t* positions,
                      const float* cos, const float* sin, int64_t half) {
  const int64_t row = heads * head_dim;
  parallel_range(tokens, std::max<int64_t>(1, kParallelMinElems / std::max<int64_t>(row, 1)),
                 [&](int64_t t0, int64_t t1) {
                   for (int64_t t = t0; t < t1; ++t) {
                     const int64_t pos = positions[t];
                     kernels_->rope_token(x + t * row, heads, head_dim, cos + pos * half, sin + pos * half,
                                          half);
                   }
                 });
}

void CpuBackend::layer_norm(const float* x, const void* weight, core::DType weight_type, const void* bias,
                            core::DType bias_type, float eps, int64_t rows, int64_t hidden, float* y) {
  const float* w = as_f32(weight, weight_type, hidden, norm_buf_);
  const float* b = as_f32(bias, bias_type, hidden, norm_bias_buf_);
  parallel_range(rows, std::max<int64_t>(1, kParallelMinElems / std::max<int64_t>(hidden, 1)),
                 [&](int64_t r0, int64_t r1) {
                   for (int64_t r = r0; r < r1; ++r) {
                     const float* xr = x + r * hidden;
                     float* yr = y + r * hidden;
                     // Two passes (mean, then squared deviations: no E[x^2] - mean^2
                     // cancellation), summed in double: rows are short next to the GEMMs around
                     // them, and f32 sums of offset rows (|mean| >> std) lose ~1e-5.
                     double sum = 0.0;
                     for (int64_t i = 0; i < hidden; ++i) sum += xr[i];
                     const double mean_d = sum / static_cast<double>(hidden);
                     double var = 0.0;
                     for (int64_t i = 0; i < hidden; ++i) var += (xr[i] - mean_d) * (xr[i] - mean_d);
                     const double inv = 1.0 / std::sqrt(var / static_cast<double>(hidden) + eps);
                     // The centred, normalised value in double (|mean| may be far above the
                     // spread), then weight and bias in f32.
                     for (int64_t i = 0; i < hidden; ++i) {
                       const float v = static_cast<float>((xr[i] - mean_d) * inv) * w[i];
                       yr[i] = b != nullptr ? v + b[i] : v;
                     }
                   }
                 });
}

void CpuBackend::gelu(const float* x, float* y, int64_t n, bool tanh_approx) {
  parallel_range(n, kParallelMinElems / 4, [&](int64_t i0, int64_t i1) {
    if (tanh_approx) {
      const float k = 0.7978845608028654f;  // sqrt(2 / pi)
      for (int64_t i = i0; i < i1; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v)));
      }
    } else {
      const float r = 0.7071067811865476f;  // 1 / sqrt(2)
      for (int64_t i = i0; i < i1; ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::erf(v * r));
      }
    }
  });
}

void CpuBackend::silu_mul(const float* gate_up, int64_t tokens, int64_t inter, float* out) {
  parallel_range(tokens, std::max<int64_t>(1, kParallelMinElems / std::max<int64_t>(inter, 1)),
                 [&](int64_t t0, int64_t t1) {
                   for (int64_t t = t0; t < t1; ++t)
                     kernels_->silu_mul_row(gate_up + t * 2 * inter, gate_up + t * 2 * inter + inter,
                                            out + t * inter, inter);
                 });
}

void CpuBackend::add_inplace(float* a, const float* b, int64_t n) {
  parallel_range(n, kParallelMinElems,
                 [&](int64_t i0, int64_t i1) { kernels_->add_row(a + i0, b + i0, i1 - i0); });
}

void CpuBackend::write_kv(const float* k, const float* v, int64_t tokens, int64_t row,
                          const int32_t* slot_mapping, void* k_cache, void* v_cache, core::DType cache_type) {
  // Scatter of a few rows per token: memory-bound and tiny in decode; conversion to a
  // 16-bit cache rounds to nearest even exactly like the reference.
  auto store_row = [&](const float* src, void* cache, int64_t slot) {
    switch (cache_type) {
      case core::DType::kF32:
        std::memcpy(static_cast<float*>(cache) + slot * row, src, static_cast<size_t>(row) * sizeof(float));
        return;
      case core::DType::kBF16: {
        uint16_t* dst = static_cast<uint16_t*>(cache) + slot * row;
        for (int64_t i = 0; i < row; ++i) dst[i] = core::f32_to_bf16(src[i]);
        return;
      }
      case core::DType::kF16: {
        uint16_t* dst = static_cast<uint16_t*>(cache) + slot * row;
        for (int64_t i = 0; i < row; ++i) dst[i] = core::f32_to_f16(src[i]);
        return;
      }
      default: LOOM_CHECK(false) << "write_kv: unsupported cache dtype " << core::dtype_name(cache_type);
    }
  };
  parallel_range(tokens, std::max<int64_t>(1, kParallelMinElems / std::max<int64_t>(row, 1)),
                 [&](int64_t t0, int64_t t1) {
                   for (int64_t t = t0; t < t1; ++t) {
                     store_row(k + t * row, k_cache, slot_mapping[t]);
                     store_row(v + t * row, v_cache, slot_mapping[t]);
                   }
                 });
}

}  // namespace loom::backends::cpu
