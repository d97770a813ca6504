#include "models/qwen/qwen_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "models/rope.h"

namespace loom::models::qwen {
namespace {

using core::DType;
using core::Shape;
using core::Tensor;

struct LayerWeights {
  Tensor input_norm, post_norm;  // [H]
  Tensor wq, wk, wv, wo;         // [Hq*D, H], [Hkv*D, H], [Hkv*D, H], [H, Hq*D]
  Tensor bq, bk, bv;             // biases (undefined when the family has none)
  Tensor q_norm, k_norm;         // [D] (Qwen3)
  Tensor w_gate_up;              // [2I, H]: gate rows then up rows (one GEMM, silu_mul splits)
  Tensor w_down;                 // [H, I]
};

// Loads a tensor with an expected shape, converting its storage to `want` when set.
class WeightLoader {
 public:
  WeightLoader(const Checkpoint& ckpt, WeightDType dtype) : ckpt_(ckpt), dtype_(dtype) {}

  core::Expected<Tensor> get(const std::string& name, const Shape& shape) const {
    LOOM_ASSIGN_OR_RETURN(Tensor t, ckpt_.get(name, shape));
    return convert(t);
  }

  // Row-concatenation of several [rows_i, cols] tensors into one (e.g. gate and up).
  core::Expected<Tensor> get_concat(const std::vector<std::string>& names,
                                    const std::vector<Shape>& shapes) const {
    std::vector<Tensor> parts;
    int64_t rows = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      LOOM_ASSIGN_OR_RETURN(Tensor t, ckpt_.get(names[i], shapes[i]));
      LOOM_ASSIGN_OR_RETURN(t, convert(t));
      rows += t.dim(0);
      parts.push_back(std::move(t));
    }
    Tensor out = Tensor::empty({rows, parts[0].dim(1)}, parts[0].dtype());
    auto* dst = static_cast<char*>(out.data());
    for (const auto& p : parts) {
      std::memcpy(dst, p.data(), p.nbytes());
      dst += p.nbytes();
    }
    return out;
  }

 private:
  core::Expected<Tensor> convert(const Tensor& t) const {
    if (t.dtype() != DType::kF32 && t.dtype() != DType::kBF16 && t.dtype() != DType::kF16)
      return core::unsupported("weight dtype " + std::string(core::dtype_name(t.dtype())) +
                               " is not supported by the dense CPU path");
    if (dtype_ == WeightDType::kF32 && t.dtype() != DType::kF32) return t.to_f32();
    if (dtype_ == WeightDType::kBF16 && t.dtype() != DType::kBF16) {
      Tensor f = t.dtype() == DType::kF32 ? t : t.to_f32();
      Tensor out = Tensor::empty(t.shape(), DType::kBF16);
      const float* s = f.data_as<float>();
      auto* d = out.data_as<uint16_t>();
      for (int64_t i = 0; i < f.numel(); ++i) d[i] = core::f32_to_bf16(s[i]);
      return out;
    }
    return t;  // zero-copy view into the mmapped checkpoint
  }

  const Checkpoint& ckpt_;
  WeightDType dtype_;
};

class QwenCausalLM final : public CausalLM {
 public:
  QwenCausalLM(const TextConfig& cfg, ops::Ops& ops) : cfg_(cfg), ops_(ops) {}

  core::Status load(const Checkpoint& ckpt, const std::string& prefix, const LoadOptions& options) {
    const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size, V = cfg_.vocab_size;
    const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, D = head_dim();
    WeightLoader w(ckpt, options.weight_dtype);
    LOOM_ASSIGN_OR_RETURN(embed_, w.get(prefix + "embed_tokens.weight", {V, H}));
    LOOM_ASSIGN_OR_RETURN(final_norm_, w.get(prefix + "norm.weight", {H}));
    if (cfg_.tie_word_embeddings) {
      lm_head_ = embed_;
    } else {
      LOOM_ASSIGN_OR_RETURN(lm_head_, w.get(head_name_, {V, H}));
    }
    if (!cfg_.layer_types.empty() && static_cast<int64_t>(cfg_.layer_types.size()) != cfg_.num_hidden_layers)
      return core::invalid_argument("config.json: layer_types has " +
                                    std::to_string(cfg_.layer_types.size()) + " entries for " +
                                    std::to_string(cfg_.num_hidden_layers) + " layers");
    layers_.resize(static_cast<size_t>(cfg_.num_hidden_layers));
    for (int64_t i = 0; i < cfg_.num_hidden_layers; ++i) {
      const std::string p = prefix + "layers." + std::to_string(i) + ".";
      LayerWeights& L = layers_[static_cast<size_t>(i)];
      LOOM_ASSIGN_OR_RETURN(L.input_norm, w.get(p + "input_layernorm.weight", {H}));
      LOOM_ASSIGN_OR_RETURN(L.post_norm, w.get(p + "post_attention_layernorm.weight", {H}));
      LOOM_ASSIGN_OR_RETURN(L.wq, w.get(p + "self_attn.q_proj.weight", {Hq * D, H}));
      LOOM_ASSIGN_OR_RETURN(L.wk, w.get(p + "self_attn.k_proj.weight", {Hkv * D, H}));
      LOOM_ASSIGN_OR_RETURN(L.wv, w.get(p + "self_attn.v_proj.weight", {Hkv * D, H}));
      LOOM_ASSIGN_OR_RETURN(L.wo, w.get(p + "self_attn.o_proj.weight", {H, Hq * D}));
      if (cfg_.attention_bias) {
        LOOM_ASSIGN_OR_RETURN(L.bq, w.get(p + "self_attn.q_proj.bias", {Hq * D}));
        LOOM_ASSIGN_OR_RETURN(L.bk, w.get(p + "self_attn.k_proj.bias", {Hkv * D}));
        LOOM_ASSIGN_OR_RETURN(L.bv, w.get(p + "self_attn.v_proj.bias", {Hkv * D}));
      }
      if (cfg_.qk_norm) {
        LOOM_ASSIGN_OR_RETURN(L.q_norm, w.get(p + "self_attn.q_norm.weight", {D}));
        LOOM_ASSIGN_OR_RETURN(L.k_norm, w.get(p + "self_attn.k_norm.weight", {D}));
      }
      LOOM_ASSIGN_OR_RETURN(L.w_gate_up, w.get_concat({p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"},
                                                      {{I, H}, {I, H}}));
      LOOM_ASSIGN_OR_RETURN(L.w_down, w.get(p + "mlp.down_proj.weight", {H, I}));
    }
    // Norm weights and biases are tiny: keep them f32 so every backend reads one dtype.
    auto to_f32 = [](Tensor& t) {
      if (t.defined() && t.dtype() != DType::kF32) t = t.to_f32();
    };
    to_f32(final_norm_);
    for (auto& L : layers_) {
      for (Tensor* t : {&L.input_norm, &L.post_norm, &L.bq, &L.bk, &L.bv, &L.q_norm, &L.k_norm}) to_f32(*t);
    }
    // Sliding-window layers: explicit layer_types, else Qwen2's rule (use_sliding_window and
    // layer index >= max_window_layers).
    layer_window_.assign(layers_.size(), 0);
    for (size_t i = 0; i < layers_.size(); ++i) {
      bool sliding = !cfg_.layer_types.empty()
                         ? cfg_.layer_types[i] == "sliding_attention"
                         : cfg_.use_sliding_window && static_cast<int64_t>(i) >= cfg_.max_window_layers;
      if (sliding && cfg_.sliding_window > 0) layer_window_[i] = static_cast<int32_t>(cfg_.sliding_window);
    }
    LOOM_ASSIGN_OR_RETURN(rope_, make_rope_tables(cfg_.rope, D, cfg_.max_position_embeddings,
                                                  std::max<int64_t>(cfg_.max_position_embeddings, 1)));
    // Everything to the backend's device (a no-op on the CPU): matrices and biases in the
    // backend's GEMM dtype, norm weights and rope tables as they are (f32).
    auto up = [this](Tensor& t) {
      if (t.defined()) t = ops_.upload(t);
    };
    auto up_weight = [this](Tensor& t) {
      if (t.defined()) t = ops_.upload_weight(t);
    };
    for (Tensor* t : {&final_norm_, &rope_.cos, &rope_.sin}) up(*t);
    up_weight(embed_);
    if (cfg_.tie_word_embeddings) {
      lm_head_ = embed_;
    } else {
      up_weight(lm_head_);
    }
    for (auto& L : layers_) {
      for (Tensor* t : {&L.input_norm, &L.post_norm, &L.q_norm, &L.k_norm}) up(*t);
      for (Tensor* t : {&L.wq, &L.wk, &L.wv, &L.wo, &L.bq, &L.bk, &L.bv, &L.w_gate_up, &L.w_down})
        up_weight(*t);
    }
    return {};
  }

  void set_head_name(std::string name) { head_name_ = std::move(name); }

  const TextConfig& text_config() const override { return cfg_; }
  int64_t num_layers() const override { return cfg_.num_hidden_layers; }
  int64_t num_kv_heads() const override { return cfg_.num_key_value_heads; }
  int64_t head_dim() const override {
    return cfg_.head_dim > 0 ? cfg_.head_dim : cfg_.hidden_size / cfg_.num_attention_heads;
  }
  int64_t vocab_size() const override { return cfg_.vocab_size; }
  std::vector<LayerKv> allocate_kv(int64_t num_blocks, int32_t block_size) override {
    std::vector<LayerKv> kv(layers_.size());
    const Shape shape = {num_blocks, block_size, num_kv_heads(), head_dim()};
    for (auto& l : kv) {
      l.k = ops_.alloc(shape, ops_.activation_dtype());
      l.v = ops_.alloc(shape, ops_.activation_dtype());
    }
    return kv;
  }

  ops::Ops& backend() override { return ops_; }

  core::Status forward(const ForwardBatch& b, std::vector<LayerKv>& kv, Tensor& logits, const DumpHook* dump,
                       bool device_logits) override {
    const auto T = static_cast<int64_t>(b.token_ids.size());
    const int64_t H = cfg_.hidden_size, I = cfg_.intermediate_size;
    const int64_t Hq = cfg_.num_attention_heads, Hkv = cfg_.num_key_value_heads, D = head_dim();
    const auto eps = static_cast<float>(cfg_.rms_norm_eps);
    LOOM_CHECK(static_cast<int64_t>(kv.size()) == num_layers()) << "kv layers " << kv.size();
    LOOM_CHECK(static_cast<int64_t>(b.positions.size()) == T &&
               static_cast<int64_t>(b.slot_mapping.size()) == T);
    for (int32_t id : b.token_ids)
      if (id < 0 || id >= cfg_.vocab_size)
        return core::invalid_argument("token id " + std::to_string(id) + " is outside the vocabulary");
    for (int32_t p : b.positions)
      if (p < 0 || p >= rope_.max_positions)
        return core::out_of_range("position " + std::to_string(p) + " exceeds max_position_embeddings " +
                                  std::to_string(rope_.max_positions));
    auto emit = [&](std::string_view name, const Tensor& t) {
      if (dump != nullptr && *dump) (*dump)(name, t);
    };

    ops_.prepare_indices(
        {b.token_ids, b.positions, b.slot_mapping, b.q_indptr, b.kv_lens, b.block_table, b.logits_rows});
    ops::PagedAttentionParams attn;
    attn.q_indptr = b.q_indptr;
    attn.kv_lens = b.kv_lens;
    attn.block_table = b.block_table;
    attn.max_blocks_per_seq = b.max_blocks_per_seq;
    attn.block_size = b.block_size;
    attn.scale = 1.0f / std::sqrt(static_cast<float>(D));
    attn.causal = true;
    ops::RopeParams rope_params{rope_.rotary_dim};

    // Activations: x/residual [T, H]; h normed [T, H]; q [T, Hq, D]; k, v [T, Hkv, D].
    const DType act_dt = ops_.activation_dtype();
    Tensor residual = ops_.empty({T, H}, act_dt);
    Tensor h = ops_.empty({T, H}, act_dt);
    Tensor q = ops_.empty({T, Hq * D}, act_dt);
    Tensor k = ops_.empty({T, Hkv * D}, act_dt);
    Tensor v = ops_.empty({T, Hkv * D}, act_dt);
    Tensor attn_out = ops_.empty({T, Hq * D}, act_dt);
    Tensor proj = ops_.empty({T, H}, act_dt);
    Tensor gate_up = ops_.empty({T, 2 * I}, act_dt);
    Tensor act = ops_.empty({T, I}, act_dt);
    const Tensor none;

    ops_.embedding(embed_, b.token_ids, residual);
    emit("embed", residual);
    for (size_t li = 0; li < layers_.size(); ++li) {
      const LayerWeights& L = layers_[li];
      const std::string blk = "blk." + std::to_string(li);
      attn.sliding_window = layer_window_[li];
      if (li == 0) {
        ops_.rms_norm(residual, L.input_norm, eps, h);
      } else {
        ops_.add_rms_norm(residual, proj, L.input_norm, eps, h);  // proj = previous MLP output
        emit("blk." + std::to_string(li - 1) + ".out", residual);
      }
      ops_.linear(h, L.wq, L.bq, q);
      ops_.linear(h, L.wk, L.bk, k);
      ops_.linear(h, L.wv, L.bv, v);
      Tensor q3 = q.reshape({T, Hq, D});
      Tensor k3 = k.reshape({T, Hkv, D});
      if (cfg_.qk_norm) {  // per-head RMSNorm over head_dim, before rotary
        Tensor qr = q.reshape({T * Hq, D});
        Tensor kr = k.reshape({T * Hkv, D});
        ops_.rms_norm(qr, L.q_norm, eps, qr);
        ops_.rms_norm(kr, L.k_norm, eps, kr);
      }
      ops_.rope(q3, b.positions, rope_.cos, rope_.sin, rope_params);
      ops_.rope(k3, b.positions, rope_.cos, rope_.sin, rope_params);
      ops_.write_kv(k3, v.reshape({T, Hkv, D}), b.slot_mapping, kv[li].k, kv[li].v);
      Tensor out3 = attn_out.reshape({T, Hq, D});
      ops_.paged_attention(q3, kv[li].k, kv[li].v, attn, out3);
      emit(blk + ".attn", attn_out);
      ops_.linear(attn_out, L.wo, none, proj);
      ops_.add_rms_norm(residual, proj, L.post_norm, eps, h);
      ops_.linear(h, L.w_gate_up, none, gate_up);
      ops_.silu_mul(gate_up, act);
      ops_.linear(act, L.w_down, none, proj);
      emit(blk + ".mlp", proj);
    }
    ops_.add_rms_norm(residual, proj, final_norm_, eps, h);
    emit("blk." + std::to_string(layers_.size() - 1) + ".out", residual);
    emit("final_norm", h);

    const auto n = static_cast<int64_t>(b.logits_rows.size());
    for (int32_t r : b.logits_rows) LOOM_CHECK(r >= 0 && r < T) << "logits row " << r << " of " << T;
    if (n == 0) {
      logits = Tensor::empty({0, cfg_.vocab_size}, DType::kF32);
      return {};
    }
    Tensor rows = ops_.empty({n, H}, act_dt);
    ops_.embedding(h, b.logits_rows, rows);  // gathers the rows whose logits are wanted
    Tensor out = ops_.empty({n, cfg_.vocab_size}, DType::kF32);
    ops_.linear(rows, lm_head_, none, out);
    logits = device_logits ? out : ops_.to_host(out);  // [n, vocab] f32
    return {};
  }

 private:
  TextConfig cfg_;
  ops::Ops& ops_;
  std::string head_name_ = "lm_head.weight";
  Tensor embed_, final_norm_, lm_head_;
  std::vector<LayerWeights> layers_;
  std::vector<int32_t> layer_window_;  // 0 = full attention
  RopeTables rope_;
};

// Where the text decoder's weights live, by checkpoint layout.
std::string decoder_prefix(const Checkpoint& ckpt) {
  for (const char* p : {"model.language_model.", "thinker.model.", "model."}) {
    if (ckpt.has(std::string(p) + "embed_tokens.weight")) return p;
  }
  return "model.";
}

}  // namespace

core::Expected<std::unique_ptr<CausalLM>> make_qwen_causal_lm(const ModelConfig& config,
                                                              const Checkpoint& ckpt, ops::Ops& ops,
                                                              const LoadOptions& options) {
  const TextConfig& t = config.text;
  if (t.hidden_size <= 0 || t.num_attention_heads <= 0 || t.num_key_value_heads <= 0 ||
      t.num_attention_heads % t.num_key_value_heads != 0)
    return core::invalid_argument("config.json: inconsistent attention heads (" +
                                  std::to_string(t.num_attention_heads) + " query, " +
                                  std::to_string(t.num_key_value_heads) + " kv)");
  if (t.hidden_act != "silu") return core::unsupported("hidden_act '" + t.hidden_act + "' (expected silu)");
  auto model = std::make_unique<QwenCausalLM>(t, ops);
  const std::string prefix = decoder_prefix(ckpt);
  model->set_head_name(prefix == "thinker.model." ? "thinker.lm_head.weight" : "lm_head.weight");
  LOOM_RETURN_IF_ERROR(model->load(ckpt, prefix, options).with_context("loading weights"));
  return std::unique_ptr<CausalLM>(std::move(model));
}

}  // namespace loom::models::qwen
