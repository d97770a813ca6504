// An Ops decorator that times every call of the wrapped backend, per op, so a run can say
// where its time goes (`loom generate --profile`). Host wall time: exact for synchronous CPU
// backends; a device backend must synchronise per op for the numbers to mean anything.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>

#include "ops/ops.h"

namespace loom::ops {

class ProfilingOps final : public Ops {
 public:
  enum Op {
    kEmbedding,
    kLinear,
    kRmsNorm,
    kAddRmsNorm,
    kRope,
    kSiluMul,
    kAdd,
    kLayerNorm,
    kGelu,
    kWriteKv,
    kAttention,
    kSample,
    kNumOps
  };

  explicit ProfilingOps(std::unique_ptr<Ops> inner) : inner_(std::move(inner)) {}

  const char* name() const override { return inner_->name(); }
  Tensor empty(const core::Shape& shape, core::DType dtype) override { return inner_->empty(shape, dtype); }
  core::DType activation_dtype() const override { return inner_->activation_dtype(); }
  Tensor alloc(const core::Shape& shape, core::DType dtype) override { return inner_->alloc(shape, dtype); }
  Tensor upload(const Tensor& host) override { return inner_->upload(host); }
  Tensor upload_weight(const Tensor& host) override { return inner_->upload_weight(host); }
  Tensor to_host(const Tensor& t) override { return inner_->to_host(t); }
  Tensor upload_scratch(const Tensor& host) override { return inner_->upload_scratch(host); }
  bool sample(const Tensor& logits, std::span<const DeviceSampleRow> rows,
              std::vector<DeviceSampleResult>* out) override;
  void prepare_indices(std::initializer_list<std::span<const int32_t>> arrays) override {
    inner_->prepare_indices(arrays);
  }

  void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) override;
  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override;
  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) override;
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& y) override;
  void rope(Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
            const RopeParams& p) override;
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) override;
  void gelu(const Tensor& x, Tensor& y, bool tanh_approx) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void add_inplace(Tensor& a, const Tensor& b) override;
  void write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping, Tensor& k_cache,
                Tensor& v_cache) override;
  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const PagedAttentionParams& p, Tensor& out) override;

  // "op  calls  total ms  share" rows, largest first.
  std::string report() const;
  void reset();

 private:
  struct Stat {
    int64_t calls = 0;
    double seconds = 0;
  };
  template <typename F>
  void timed(Op op, F&& f);

  std::unique_ptr<Ops> inner_;
  std::array<Stat, kNumOps> stats_{};
};

}  // namespace loom::ops
