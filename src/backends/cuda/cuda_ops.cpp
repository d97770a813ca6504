#include "backends/cuda/cuda_ops.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backends/cuda/attention/paged_attention.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_memory.h"
#include "backends/cuda/gemm.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/kernels.h"
#include "backends/cuda/sampling.h"

namespace loom::backends::cuda {
namespace {

using core::DType;
using core::Tensor;

// Ops cannot return a Status (the interface is shared with the CPU backends, which cannot fail
// at run time); a failing kernel launch on the device is a bug or a dead device, so it aborts
// with the CUDA error text. Argument errors are the model's bugs.
void must(const core::Status& st, const char* what) {
  LOOM_CHECK(st.ok()) << what << ": " << st.to_string();
}

template <typename T>
T must(core::Expected<T> e, const char* what) {
  LOOM_CHECK(e.ok()) << what << ": " << e.status().to_string();
  return std::move(e).value();
}

bool on_device(const Tensor& t) {
  return t.device() == core::Device::kCuda;
}

class CudaOps final : public ops::Ops {
 public:
  CudaOps(std::unique_ptr<DeviceArena> arena, std::unique_ptr<Gemm> gemm,
          std::unique_ptr<PinnedStaging> staging, cudaStream_t stream)
      : arena_(std::move(arena)), gemm_(std::move(gemm)), staging_(std::move(staging)), stream_(stream) {}
  ~CudaOps() override {
    cudaStreamSynchronize(stream_);
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    cudaStreamDestroy(stream_);
  }

  const char* name() const override { return "cuda"; }
  DType activation_dtype() const override { return DType::kBF16; }

  Tensor empty(const core::Shape& shape, DType dtype) override {
    return must(arena_->scratch_tensor(shape, dtype), "GPU activation memory");
  }
  Tensor alloc(const core::Shape& shape, DType dtype) override {
    return must(arena_->tensor(shape, dtype), "GPU memory (weights / KV cache)");
  }

  Tensor upload(const Tensor& host) override {
    if (on_device(host)) return host;
    Tensor dev = alloc(host.shape(), host.dtype());
    must(copy_to_device(dev.data(), host.data(), host.nbytes()), "upload");
    return dev;
  }

  Tensor upload_weight(const Tensor& host) override {
    if (on_device(host)) return host;
    if (host.dtype() == DType::kBF16) return upload(host);
    // f32 / f16 checkpoints: round to bf16 once on the host (RNE, as torch's .to(bfloat16)).
    Tensor f = host.dtype() == DType::kF32 ? host : host.to_f32();
    Tensor b = Tensor::empty(host.shape(), DType::kBF16);
    core::convert_from_f32(f.data_as<float>(), DType::kBF16, b.data(), static_cast<size_t>(f.numel()));
    return upload(b);
  }

  Tensor upload_scratch(const Tensor& host) override {
    if (on_device(host)) return host;
    Tensor dev = empty(host.shape(), host.dtype());
    must(staging_->upload(dev.data(), host.data(), host.nbytes(), stream_), "scratch upload");
    return dev;
  }

  Tensor to_host(const Tensor& t) override {
    if (!on_device(t)) return t;
    Tensor h = Tensor::empty(t.shape(), t.dtype());
    must(copy_to_host_async(h.data(), t.data(), t.nbytes(), stream_), "download");
    LOOM_CHECK(cudaStreamSynchronize(stream_) == cudaSuccess) << cudaGetErrorString(cudaGetLastError());
    return h;
  }

  void prepare_indices(std::initializer_list<std::span<const int32_t>> arrays) override {
    // A new forward: the previous forward's activations are dead once the stream reaches here,
    // and every scratch use is enqueued on this same stream, so reuse is ordered.
    arena_->reset_scratch();
    device_index_.clear();
    size_t total = 0;
    for (const auto& a : arrays) total += (a.size() + 63) / 64 * 64;
    if (total == 0) return;
    auto* base =
        static_cast<int32_t*>(must(arena_->allocate_scratch(total * sizeof(int32_t)), "index arrays"));
    host_pack_.resize(total);
    size_t off = 0;
    for (const auto& a : arrays) {
      std::copy(a.begin(), a.end(), host_pack_.begin() + static_cast<std::ptrdiff_t>(off));
      if (!a.empty()) device_index_[a.data()] = base + off;
      off += (a.size() + 63) / 64 * 64;
    }
    must(staging_->upload(base, host_pack_.data(), total * sizeof(int32_t), stream_), "index upload");
  }

  void embedding(const Tensor& table, std::span<const int32_t> ids, Tensor& out) override {
    if (replaying_) return;
    must(gather_rows(table.data(), table.dim(0), table.numel() / table.dim(0), table.dtype(), dev(ids),
                     static_cast<int64_t>(ids.size()), out.data(), stream_),
         "embedding");
  }

  void linear(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& y) override {
    if (replaying_) return;
    GemmArgs g;
    g.x = x.data();
    g.w = w.data();
    g.y = y.data();
    g.k = x.dim(-1);
    g.m = x.numel() / g.k;
    g.n = w.dim(0);
    g.in_dtype = x.dtype();
    g.out_dtype = y.dtype();
    LOOM_CHECK(w.dtype() == x.dtype()) << "linear: weight " << core::dtype_name(w.dtype())
                                       << " vs activations " << core::dtype_name(x.dtype());
    if (bias.defined()) {
      LOOM_CHECK(bias.dtype() == y.dtype()) << "linear: bias dtype must match the output";
      g.bias = bias.data();
    }
    // Decode (M <= 8) of small weights: our GEMV (gemv.h). On the H200 it reads q/k/v/o-sized weights
    // (<= 32M elements) 1.2-2.1x faster than cuBLASLt, which is as fast or faster (88-99% of HBM) on
    // the large MLP and lm_head matrices (cuda_gemv_bench). LOOM_CUDA_GEMV=0 keeps cuBLASLt for all.
    constexpr int64_t kGemvMaxWeightElems = int64_t{32} << 20;
    if (g.m <= kGemvMaxRows && g.n * g.k <= kGemvMaxWeightElems && gemv_enabled() && gemv_vectorized(g)) {
      must(gemv(g, stream_), "linear (gemv)");
      return;
    }
    must(gemm_->run(g, stream_), "linear");
  }

  void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& y) override {
    if (replaying_) return;
    const int64_t hidden = x.dim(-1);
    must(cuda::rms_norm(x.data(), {weight.data(), weight.dtype()}, eps, y.data(), x.numel() / hidden, hidden,
                        x.dtype(), stream_),
         "rms_norm");
  }

  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& weight, float eps, Tensor& y) override {
    if (replaying_) return;
    const int64_t hidden = x.dim(-1);
    must(cuda::add_rms_norm(residual.data(), x.data(), {weight.data(), weight.dtype()}, eps, y.data(),
                            x.numel() / hidden, hidden, x.dtype(), stream_),
         "add_rms_norm");
  }

  void rope(Tensor& x, std::span<const int32_t> positions, const Tensor& cos, const Tensor& sin,
            const ops::RopeParams& p) override {
    if (replaying_) return;
    HeadView v{x.data(), x.dim(0), x.dim(1), x.dim(2), 0, x.dtype()};
    RopeTables t{cos.data_as<float>(), sin.data_as<float>(), cos.dim(0), p.rotary_dim};
    must(rope_neox(v, dev(positions), t, stream_), "rope");
  }

  void silu_mul(const Tensor& gate_up, Tensor& out) override {
    if (replaying_) return;
    must(cuda::silu_mul(gate_up.data(), out.data(), out.dim(0), out.dim(1), out.dtype(), stream_),
         "silu_mul");
  }

  // ---- vision-tower ops (layer_norm, gelu); row gathers go through embedding ----
  void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, float eps, Tensor& y) override {
    if (replaying_) return;
    LOOM_CHECK(y.dtype() == x.dtype() && y.numel() == x.numel() && x.rank() >= 1 &&
               x.dim(-1) == weight.numel())
        << "layer_norm x " << core::shape_to_string(x.shape()) << " weight "
        << core::shape_to_string(weight.shape()) << " y " << core::shape_to_string(y.shape());
    const int64_t hidden = x.dim(-1);
    const NormWeight b =
        bias.defined() ? NormWeight{bias.data(), bias.dtype()} : NormWeight{nullptr, DType::kF32};
    must(cuda::layer_norm(x.data(), {weight.data(), weight.dtype()}, b, eps, y.data(), x.numel() / hidden,
                          hidden, x.dtype(), stream_),
         "layer_norm");
  }

  void gelu(const Tensor& x, Tensor& y, bool tanh_approx) override {
    if (replaying_) return;
    LOOM_CHECK(y.dtype() == x.dtype() && y.numel() == x.numel())
        << "gelu x " << core::shape_to_string(x.shape()) << " y " << core::shape_to_string(y.shape());
    must(cuda::gelu(x.data(), y.data(), x.numel(), tanh_approx, x.dtype(), stream_), "gelu");
  }

  void add_inplace(Tensor& a, const Tensor& b) override {
    if (replaying_) return;
    must(add(a.data(), b.data(), a.data(), a.numel(), a.dtype(), stream_), "add");
  }

  void write_kv(const Tensor& k, const Tensor& v, std::span<const int32_t> slot_mapping, Tensor& k_cache,
                Tensor& v_cache) override {
    if (replaying_) return;
    HeadView kv{const_cast<void*>(k.data()), k.dim(0), k.dim(1), k.dim(2), 0, k.dtype()};
    HeadView vv{const_cast<void*>(v.data()), v.dim(0), v.dim(1), v.dim(2), 0, v.dtype()};
    KvCacheView cache{k_cache.data(), v_cache.data(), k_cache.dim(0), k_cache.dim(1),
                      k_cache.dim(2), k_cache.dim(3), k_cache.dtype()};
    must(cuda::write_kv(kv, vv, dev(slot_mapping), cache, stream_), "write_kv");
  }

  void paged_attention(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                       const ops::PagedAttentionParams& p, Tensor& out) override {
    PagedAttentionDesc d;
    d.num_seqs = static_cast<int32_t>(p.kv_lens.size());
    d.num_tokens = static_cast<int32_t>(q.dim(0));
    d.q_heads = static_cast<int32_t>(q.dim(1));
    d.kv_heads = static_cast<int32_t>(k_cache.dim(2));
    d.head_dim = static_cast<int32_t>(q.dim(2));
    d.block_size = p.block_size;
    d.max_blocks_per_seq = p.max_blocks_per_seq;
    int32_t max_q = 0, max_kv = 0;
    for (size_t s = 0; s < p.kv_lens.size(); ++s) {
      max_q = std::max(max_q, p.q_indptr[s + 1] - p.q_indptr[s]);
      max_kv = std::max(max_kv, p.kv_lens[s]);
    }
    d.max_q_len = max_q;
    d.max_kv_len_bound = p.max_kv_len_bound > 0 ? p.max_kv_len_bound : max_kv;
    d.scale = p.scale;
    d.causal = p.causal;
    d.sliding_window = p.sliding_window;
    d.dtype = q.dtype();
    d.q_indptr = dev(p.q_indptr);
    d.kv_lens = dev(p.kv_lens);
    d.block_table = dev(p.block_table);
    const size_t ws = paged_attention_workspace_bytes(d);
    void* workspace = ws > 0 ? must(arena_->allocate_scratch(ws), "attention workspace") : nullptr;
    if (replaying_) return;
    must(cuda::paged_attention(d, q.data(), k_cache.data(), v_cache.data(), out.data(), workspace, stream_),
         "paged_attention");
  }

  bool supports_graphs() const override { return true; }

  ops::GraphStep graph_begin(uint64_t key) override {
    LOOM_CHECK(!in_graph_) << "graph_begin inside a graph region";
    in_graph_ = true;
    if (graphs_.count(key) != 0) {
      replaying_ = true;
      return ops::GraphStep::kReplay;
    }
    if (warmed_.insert(key).second) return ops::GraphStep::kEager;  // first use: plans get built
    LOOM_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    capturing_ = true;
    return ops::GraphStep::kCapture;
  }

  void graph_end(uint64_t key) override {
    LOOM_CHECK(in_graph_) << "graph_end without graph_begin";
    in_graph_ = false;
    replaying_ = false;
    if (capturing_) {
      capturing_ = false;
      cudaGraph_t graph = nullptr;
      LOOM_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
      cudaGraphExec_t exec = nullptr;
      LOOM_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      cudaGraphDestroy(graph);
      graphs_.emplace(key, exec);
    }
    auto it = graphs_.find(key);
    if (it == graphs_.end()) return;  // eager warm-up
    LOOM_CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
  }

  bool sample(const Tensor& logits, std::span<const ops::DeviceSampleRow> rows,
              std::vector<ops::DeviceSampleResult>* out) override {
    LOOM_CHECK(on_device(logits) && logits.rank() == 2) << "sample: device logits [rows, vocab] expected";
    const auto n = static_cast<int32_t>(rows.size());
    const auto vocab = static_cast<int32_t>(logits.dim(1));
    LOOM_CHECK(logits.dim(0) == n) << "sample: " << logits.dim(0) << " logits rows for " << n << " rows";
    std::vector<SamplingRowParams> params(rows.size());
    std::vector<double> uniforms(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      params[i].temperature = r.temperature;
      params[i].top_p = r.top_p;
      params[i].top_k = r.top_k;
      params[i].min_p = r.min_p;
      params[i].greedy = r.greedy ? 1 : 0;
      params[i].num_logprobs = r.num_logprobs;
      uniforms[i] = r.uniform;
    }
    // Scratch: params, uniforms, outputs, workspace (all dead after this call returns).
    auto* d_params = static_cast<SamplingRowParams*>(
        must(arena_->allocate_scratch(params.size() * sizeof(SamplingRowParams)), "sampling params"));
    auto* d_uniforms =
        static_cast<double*>(must(arena_->allocate_scratch(uniforms.size() * sizeof(double)), "uniforms"));
    const size_t k = kMaxTopLogprobs;
    auto* d_tokens = static_cast<int32_t*>(must(arena_->allocate_scratch(rows.size() * 4), "sampled tokens"));
    auto* d_lp = static_cast<float*>(must(arena_->allocate_scratch(rows.size() * 4), "logprobs"));
    auto* d_top_ids = static_cast<int32_t*>(must(arena_->allocate_scratch(rows.size() * k * 4), "top ids"));
    auto* d_top_lp = static_cast<float*>(must(arena_->allocate_scratch(rows.size() * k * 4), "top logprobs"));
    const size_t ws_bytes = sampling_workspace_bytes(n, vocab, 0);
    void* ws = ws_bytes > 0 ? must(arena_->allocate_scratch(ws_bytes), "sampling workspace") : nullptr;
    must(staging_->upload(d_params, params.data(), params.size() * sizeof(SamplingRowParams), stream_),
         "sampling params upload");
    must(staging_->upload(d_uniforms, uniforms.data(), uniforms.size() * sizeof(double), stream_),
         "uniforms upload");
    SamplingBatch batch;
    batch.logits = logits.data();
    batch.logits_dtype = logits.dtype();
    batch.rows = n;
    batch.vocab = vocab;
    batch.params = d_params;
    batch.uniforms = d_uniforms;
    SamplingOutputs outs{d_tokens, d_lp, d_top_ids, d_top_lp};
    must(cuda::sample(batch, outs, ws, ws_bytes, stream_), "sample");
    std::vector<int32_t> tokens(rows.size()), top_ids(rows.size() * k);
    std::vector<float> lps(rows.size()), top_lps(rows.size() * k);
    must(copy_to_host_async(tokens.data(), d_tokens, tokens.size() * 4, stream_), "tokens download");
    must(copy_to_host_async(lps.data(), d_lp, lps.size() * 4, stream_), "logprobs download");
    bool any_top = false;
    for (const auto& r : rows) any_top = any_top || r.num_logprobs > 0;
    if (any_top) {
      must(copy_to_host_async(top_ids.data(), d_top_ids, top_ids.size() * 4, stream_), "top ids download");
      must(copy_to_host_async(top_lps.data(), d_top_lp, top_lps.size() * 4, stream_),
           "top logprobs download");
    }
    LOOM_CHECK(cudaStreamSynchronize(stream_) == cudaSuccess) << cudaGetErrorString(cudaGetLastError());
    out->assign(rows.size(), {});
    for (size_t i = 0; i < rows.size(); ++i) {
      (*out)[i].token = tokens[i];
      (*out)[i].logprob = rows[i].num_logprobs >= 0 ? lps[i] : 0.0f;
      for (int32_t j = 0; j < std::max(rows[i].num_logprobs, 0); ++j)
        (*out)[i].top.emplace_back(top_ids[i * k + static_cast<size_t>(j)],
                                   top_lps[i * k + static_cast<size_t>(j)]);
    }
    return true;
  }

 private:
  // The device copy of an index array announced by prepare_indices.
  const int32_t* dev(std::span<const int32_t> host) const {
    if (host.empty()) return nullptr;
    auto it = device_index_.find(host.data());
    LOOM_CHECK(it != device_index_.end()) << "index array was not announced through prepare_indices";
    return it->second;
  }

  std::unique_ptr<DeviceArena> arena_;
  std::unique_ptr<Gemm> gemm_;
  std::unique_ptr<PinnedStaging> staging_;
  cudaStream_t stream_;
  std::unordered_map<const int32_t*, const int32_t*> device_index_;
  // Graphs by key; keys seen once (warmed up eagerly); the state of the current region.
  std::unordered_map<uint64_t, cudaGraphExec_t> graphs_;
  std::unordered_set<uint64_t> warmed_;
  bool in_graph_ = false, replaying_ = false, capturing_ = false;
  std::vector<int32_t> host_pack_;
};

}  // namespace

core::Expected<std::unique_ptr<ops::Ops>> make_cuda_ops(double gpu_memory_utilization) {
  LOOM_ASSIGN_OR_RETURN(int count, device_count());
  if (count == 0) return core::unsupported("--device cuda: no CUDA device is present");
  if (!(gpu_memory_utilization > 0 && gpu_memory_utilization <= 1))
    return core::invalid_argument("--gpu-memory-utilization must be in (0, 1]");
  LOOM_ASSIGN_OR_RETURN(auto gemm, Gemm::create());
  LOOM_ASSIGN_OR_RETURN(auto arena, DeviceArena::create_fraction(gpu_memory_utilization));
  LOOM_ASSIGN_OR_RETURN(auto staging, PinnedStaging::create(size_t{16} << 20));
  cudaStream_t stream = nullptr;
  LOOM_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return std::unique_ptr<ops::Ops>(
      new CudaOps(std::move(arena), std::move(gemm), std::move(staging), stream));
}

}  // namespace loom::backends::cuda
