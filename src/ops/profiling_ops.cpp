#include "ops/profiling_ops.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

namespace loom::ops {
namespace {

// In the order of ProfilingOps::Op.
constexpr const char* kOpNames[] = {"embedding",       "linear", "rms_norm",   "add_rms_norm", "rope",
                                    "silu_mul",        "add",    "layer_norm", "gelu",         "write_kv",
                                    "paged_attention", "sample"};
static_assert(sizeof(kOpNames) / sizeof(kOpNames[0]) == ProfilingOps::kNumOps);

}  // namespace

template <typename F>
void ProfilingOps::timed(Op op, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  stats_[op].seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ++stats_[op].calls;
}

void ProfilingOps::embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) {
  timed(kEmbedding, [&] { inner_->embedding(table, ids, out); });
}
void ProfilingOps::linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) {
  timed(kLinear, [&] { inner_->linear(x, w, bias, y); });
}
void ProfilingOps::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) {
  timed(kRmsNorm, [&] { inner_->rms_norm(x, weight, eps, y); });
}
void ProfilingOps::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps,
                                Tensor& y) {
  timed(kAddRmsNorm, [&] { inner_->add_rms_norm(residual, x, weight, eps, y); });
}
void ProfilingOps::rope(Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
                        const RopeParams& p) {
  timed(kRope, [&] { inner_->rope(x, positions, cos, sin, p); });
}
void ProfilingOps::silu_mul(const Tensor& gate_up, Tensor& out) {
  timed(kSiluMul, [&] { inner_->silu_mul(gate_up, out); });
}
void ProfilingOps::layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps,
                              Tensor& y) {
  timed(kLayerNorm, [&] { inner_->layer_norm(x, weight, bias, eps, y); });
}
void ProfilingOps::gelu(const Tensor& x, Tensor& y, bool tanh_approx) {
  timed(kGelu, [&] { inner_->gelu(x, y, tanh_approx); });
}
void ProfilingOps::add_inplace(Tensor& a, const Tensor& b) {
  timed(kAdd, [&] { inner_->add_inplace(a, b); });
}
void ProfilingOps::write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping,
                            Tensor& k_cache, Tensor& v_cache) {
  timed(kWriteKv, [&] { inner_->write_kv(k, v, slot_mapping, k_cache, v_cache); });
}
void ProfilingOps::paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                   const PagedAttentionParams& p, Tensor& out) {
  timed(kAttention, [&] { inner_->paged_attention(q, k_cache, v_cache, p, out); });
}

bool ProfilingOps::sample(const Tensor& logits, std::span<const DeviceSampleRow> rows,
                          std::vector<DeviceSampleResult>* out) {
  bool ok = false;
  timed(kSample, [&] { ok = inner_->sample(logits, rows, out); });
  return ok;
}

std::string ProfilingOps::report() const {
  double total = 0;
  for (const auto& s : stats_) total += s.seconds;
  std::vector<int> order;
  for (int i = 0; i < kNumOps; ++i)
    if (stats_[i].calls > 0) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return stats_[a].seconds > stats_[b].seconds; });
  std::string out = "op                 calls    total ms   share\n";
  char line[128];
  for (int i : order) {
    std::snprintf(line, sizeof line, "%-16s %7lld %11.1f %6.1f%%\n", kOpNames[i],
                  static_cast<long long>(stats_[i].calls), stats_[i].seconds * 1e3,
                  total > 0 ? 100.0 * stats_[i].seconds / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-16s %7s %11.1f\n", "all ops", "", total * 1e3);
  out += line;
  return out;
}

void ProfilingOps::reset() {
  stats_ = {};
}

}  // namespace loom::ops
