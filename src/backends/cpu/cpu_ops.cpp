#include "backends/cpu/cpu_ops.h"

#include <string>

#include "backends/cpu/cpu_backend.h"
#include "ops/reference_ops.h"

namespace loom::backends::cpu {

namespace {

using core::Tensor;
namespace contract = ops::contract;

class CpuOps final : public ops::Ops {
 public:
  explicit CpuOps(const CpuOpsOptions& o)
      : backend_(o.num_threads, o.isa),
        name_("cpu-" + std::string(isa_name(backend_.isa())) + "-t" +
              std::to_string(backend_.num_threads())) {}

  const char* name() const override { return name_.c_str(); }

  void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) override {
    const auto d = contract::check_embedding(table, ids, out);
    backend_.embedding(table.data(), table.dtype(), d.hidden, ids.data(), d.tokens, out.data_as<float>());
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override {
    const auto d = contract::check_linear(x, w, bias, y);
    LinearDesc desc;
    desc.x = x.data_as<float>();
    desc.w = w.data();
    desc.w_type = w.dtype();
    desc.bias = bias.defined() ? bias.data() : nullptr;
    desc.bias_type = bias.dtype();
    desc.y = y.data_as<float>();
    desc.m = d.m;
    desc.k = d.k;
    desc.n = d.n;
    backend_.linear(desc);
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) override {
    const auto d = contract::check_rms_norm(x, weight, y);
    backend_.rms_norm(x.data_as<float>(), weight.data(), weight.dtype(), eps, d.rows, d.hidden,
                      y.data_as<float>());
  }

  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& y) override {
    const auto d = contract::check_add_rms_norm(residual, x, weight, y);
    backend_.add_rms_norm(residual.data_as<float>(), x.data_as<float>(), weight.data(), weight.dtype(), eps,
                          d.rows, d.hidden, y.data_as<float>());
  }

  void rope(Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
            const ops::RopeParams& p) override {
    const auto d = contract::check_rope(x, positions, cos, sin, p);
    backend_.rope(x.data_as<float>(), d.tokens, d.heads, d.head_dim, positions.data(), cos.data_as<float>(),
                  sin.data_as<float>(), d.half);
  }

  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) override {
    const auto d = contract::check_layer_norm(x, weight, bias, y);
    backend_.layer_norm(x.data_as<float>(), weight.data(), weight.dtype(),
                        bias.defined() ? bias.data() : nullptr, bias.dtype(), eps, d.rows, d.hidden,
                        y.data_as<float>());
  }

  void gelu(const Tensor& x, Tensor& y, bool tanh_approx) override {
    const int64_t n = contract::check_gelu(x, y);
    backend_.gelu(x.data_as<float>(), y.data_as<float>(), n, tanh_approx);
  }

  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    const auto d = contract::check_silu_mul(gate_up, out);
    backend_.silu_mul(gate_up.data_as<float>(), d.tokens, d.inter, out.data_as<float>());
  }

  void add_inplace(Tensor& a, const Tensor& b) override {
    const int64_t n = contract::check_add_inplace(a, b);
    backend_.add_inplace(a.data_as<float>(), b.data_as<float>(), n);
  }

  void write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping, Tensor& k_cache,
                Tensor& v_cache) override {
    const auto d = contract::check_write_kv(k, v, slot_mapping, k_cache, v_cache);
    backend_.write_kv(k.data_as<float>(), v.data_as<float>(), d.tokens, d.kv_heads * d.head_dim,
                      slot_mapping.data(), k_cache.data(), v_cache.data(), k_cache.dtype());
  }

  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const ops::PagedAttentionParams& p, Tensor& out) override {
    const auto d = contract::check_paged_attention(q, k_cache, v_cache, p, out);
    AttentionDesc desc;
    desc.q = q.data_as<float>();
    desc.out = out.data_as<float>();
    desc.tokens = d.tokens;
    desc.q_heads = d.q_heads;
    desc.kv_heads = d.kv_heads;
    desc.head_dim = d.head_dim;
    desc.k_cache = k_cache.data();
    desc.v_cache = v_cache.data();
    desc.cache_type = k_cache.dtype();
    desc.num_seqs = static_cast<int32_t>(d.num_seqs);
    desc.q_indptr = p.q_indptr.data();
    desc.kv_lens = p.kv_lens.data();
    desc.block_table = p.block_table.data();
    desc.max_blocks_per_seq = p.max_blocks_per_seq;
    desc.block_size = p.block_size;
    desc.scale = p.scale;
    desc.causal = p.causal;
    desc.sliding_window = p.sliding_window;
    backend_.paged_attention(desc);
  }

 private:
  CpuBackend backend_;
  std::string name_;
};

}  // namespace

std::unique_ptr<ops::Ops> make_cpu_ops(int num_threads) {
  CpuOpsOptions o;
  o.num_threads = num_threads;
  return make_cpu_ops(o);
}

std::unique_ptr<ops::Ops> make_cpu_ops(const CpuOpsOptions& options) {
  return std::make_unique<CpuOps>(options);
}

}  // namespace loom::backends::cpu
