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
  Tensor w_qkv, wo;              // [(Hq + 2*Hkv)*D, H]: q rows, k rows, v rows (one GEMM); [H, Hq*D]
  Tensor b_qkv;                  // [(Hq + 2*Hkv)*D] (undefined when the family has no biases)
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
      core::convert_from_f32(f.data_as<float>(), DType::kBF16, out.data(), static_cast<size_t>(f.numel()));
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
      LOOM_ASSIGN_OR_RETURN(L.w_qkv,
                            w.get_concat({p + "self_attn.q_proj.weight", p + "self_attn.k_proj.weight",
                                          p + "self_attn.v_proj.weight"},
                                         {{Hq * D, H}, {Hkv * D, H}, {Hkv * D, H}}));
      LOOM_ASSIGN_OR_RETURN(L.wo, w.get(p + "self_attn.o_proj.weight", {H, Hq * D}));
      if (cfg_.attention_bias) {
        LOOM_ASSIGN_OR_RETURN(Tensor bq, w.get(p + "self_attn.q_proj.bias", {Hq * D}));
        LOOM_ASSIGN_OR_RETURN(Tensor bk, w.get(p + "self_attn.k_proj.bias", {Hkv * D}));
        LOOM_ASSIGN_OR_RETURN(Tensor bv, w.get(p + "self_attn.v_proj.bias", {Hkv * D}));
        L.b_qkv = Tensor::empty({(Hq + 2 * Hkv) * D}, DType::kF32);
        float* dst = L.b_qkv.data_as<float>();
        for (const Tensor* b : {&bq, &bk, &bv}) {
          const Tensor f = b->to_f32();
          std::memcpy(dst, f.data(), f.nbytes());
          dst += f.numel();
        }
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
      for (Tensor* t : {&L.input_norm, &L.post_norm, &L.b_qkv, &L.q_norm, &L.k_norm}) to_f32(*t);
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
    rope_host_cos_ = rope_.cos;
    rope_host_sin_ = rope_.sin;
    LOOM_RETURN_IF_ERROR(set_mrope_rows());
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
      for (Tensor* t : {&L.w_qkv, &L.wo, &L.b_qkv, &L.w_gate_up, &L.w_down}) up_weight(*t);
    }
    return {};
  }

  void set_head_name(std::string name) { head_name_ = std::move(name); }

  // Which M-RoPE row (0 t, 1 h, 2 w) each rotary pair takes: in blocks of mrope_section (Qwen2.5-VL,
  // transformers' apply_multimodal_rotary_pos_emb) or interleaved THWTHW...TT (Qwen3-VL's
  // apply_interleaved_mrope). The same row serves pair i's two halves.
  core::Status set_mrope_rows() {
    const auto& sec = cfg_.rope.mrope_section;
    mrope_row_.clear();
    if (sec.empty()) return {};
    const int32_t half = rope_.rotary_dim / 2;
    if (sec.size() != 3 || sec[0] < 0 || sec[1] < 0 || sec[2] < 0 || sec[0] + sec[1] + sec[2] != half)
      return core::invalid_argument("config.json: mrope_section must be three counts summing to " +
                                    std::to_string(half) + " (rotary_dim / 2)");
    mrope_row_.resize(static_cast<size_t>(half));
    for (int32_t i = 0; i < half; ++i) {
      uint8_t r = 0;
      if (cfg_.rope.mrope_interleaved) {
        if (i % 3 == 1 && i < 3 * sec[1]) r = 1;
        if (i % 3 == 2 && i < 3 * sec[2]) r = 2;
      } else {
        r = i < sec[0] ? 0 : i < sec[0] + sec[1] ? 1 : 2;
      }
      mrope_row_[static_cast<size_t>(i)] = r;
    }
    return {};
  }

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
    const bool mrope = !b.mrope_positions.empty();
    if (mrope) {
      if (mrope_row_.empty())
        return core::invalid_argument("M-RoPE positions for a model without mrope_section");
      if (static_cast<int64_t>(b.mrope_positions.size()) != 3 * T)
        return core::invalid_argument("M-RoPE positions must be [3, tokens]");
      for (int32_t p : b.mrope_positions)
        if (p < 0 || p >= rope_.max_positions)
          return core::out_of_range("M-RoPE position " + std::to_string(p) +
                                    " exceeds max_position_embeddings " +
                                    std::to_string(rope_.max_positions));
    }
    // Multimodal rows: the token embedding of row mm_rows[i] is replaced by mm_embeds[i] (and the
    // DeepStack rows are added after the first layers): X = [token embeddings; mm_embeds] is
    // gathered through mm_perm (t, or T + i for the i-th multimodal row); the DeepStack additions
    // gather from [0; deepstack] through ds_perm (0, or 1 + i), so text rows add an exact zero.
    const auto N = static_cast<int64_t>(b.mm_rows.size());
    const DType act_dt = ops_.activation_dtype();
    std::vector<int32_t> mm_perm, ds_perm;
    if (N > 0) {
      if (!b.mm_embeds.defined() || b.mm_embeds.shape() != core::Shape{N, H} || b.mm_embeds.dtype() != act_dt)
        return core::invalid_argument("multimodal embeddings must be [" + std::to_string(N) + ", " +
                                      std::to_string(H) + "] in " + std::string(core::dtype_name(act_dt)));
      if (b.deepstack_embeds.size() > layers_.size())
        return core::invalid_argument("more DeepStack inputs than decoder layers");
      for (const auto& d : b.deepstack_embeds)
        if (d.shape() != b.mm_embeds.shape() || d.dtype() != act_dt)
          return core::invalid_argument("DeepStack embeddings must match the multimodal embeddings");
      mm_perm.resize(static_cast<size_t>(T));
      ds_perm.assign(static_cast<size_t>(T), 0);
      for (int64_t t = 0; t < T; ++t) mm_perm[static_cast<size_t>(t)] = static_cast<int32_t>(t);
      for (int64_t i = 0; i < N; ++i) {
        const int32_t r = b.mm_rows[static_cast<size_t>(i)];
        if (r < 0 || r >= T || ds_perm[static_cast<size_t>(r)] != 0)
          return core::invalid_argument("multimodal rows must be distinct token rows");
        mm_perm[static_cast<size_t>(r)] = static_cast<int32_t>(T + i);
        ds_perm[static_cast<size_t>(r)] = static_cast<int32_t>(1 + i);
      }
    } else if (!b.deepstack_embeds.empty() || b.mm_embeds.defined()) {
      return core::invalid_argument("multimodal embeddings without rows");
    }
    // The fused q/k/v output [T, (Hq + 2*Hkv)*D] is split into contiguous q, k, v by row gathers over
    // its view as [T * (group + 2), Hkv*D] rows: token t's q is rows t*(group+2) + 0..group-1, its k
    // row t*(group+2) + group, its v the next one.
    const int64_t group = Hq / Hkv, per_token = group + 2;
    std::vector<int32_t> q_rows(static_cast<size_t>(T * group)), k_rows(static_cast<size_t>(T)),
        v_rows(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j < group; ++j)
        q_rows[static_cast<size_t>(t * group + j)] = static_cast<int32_t>(t * per_token + j);
      k_rows[static_cast<size_t>(t)] = static_cast<int32_t>(t * per_token + group);
      v_rows[static_cast<size_t>(t)] = static_cast<int32_t>(t * per_token + group + 1);
    }
    std::vector<int32_t> iota(static_cast<size_t>(std::max<int64_t>(mrope ? T : 0, N)));
    for (size_t i = 0; i < iota.size(); ++i) iota[i] = static_cast<int32_t>(i);
    auto emit = [&](std::string_view name, const Tensor& t) {
      if (dump != nullptr && *dump) (*dump)(name, t);
    };

    ops_.prepare_indices({b.token_ids, b.positions, b.slot_mapping, b.q_indptr, b.kv_lens, b.block_table,
                          b.logits_rows, iota, mm_perm, ds_perm, q_rows, k_rows, v_rows});
    ops::PagedAttentionParams attn;
    attn.q_indptr = b.q_indptr;
    attn.kv_lens = b.kv_lens;
    attn.block_table = b.block_table;
    attn.max_blocks_per_seq = b.max_blocks_per_seq;
    attn.block_size = b.block_size;
    attn.scale = 1.0f / std::sqrt(static_cast<float>(D));
    attn.causal = true;
    attn.max_kv_len_bound = b.max_kv_len_bound;
    ops::RopeParams rope_params{rope_.rotary_dim};
    // M-RoPE: per-token tables (row t holds, for each pair, the table entry at the position of the
    // pair's section), applied with positions 0..T-1. The values are the 1-D table's entries, so a
    // token whose three positions agree rotates exactly as 1-D RoPE does.
    Tensor rope_cos = rope_.cos, rope_sin = rope_.sin;
    std::span<const int32_t> rope_pos = b.positions;
    if (mrope) {
      const auto half = static_cast<int64_t>(mrope_row_.size());
      Tensor c = Tensor::empty({T, half}, DType::kF32), sn = Tensor::empty({T, half}, DType::kF32);
      const float* hc = rope_host_cos_.data_as<float>();
      const float* hs = rope_host_sin_.data_as<float>();
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < half; ++i) {
          const int64_t p =
              b.mrope_positions[static_cast<size_t>(mrope_row_[static_cast<size_t>(i)] * T + t)];
          c.data_as<float>()[t * half + i] = hc[p * half + i];
          sn.data_as<float>()[t * half + i] = hs[p * half + i];
        }
      rope_cos = ops_.upload_scratch(c);
      rope_sin = ops_.upload_scratch(sn);
      rope_pos = std::span<const int32_t>(iota).first(static_cast<size_t>(T));
    }

    // Activations: x/residual [T, H]; h normed [T, H]; q [T, Hq, D]; k, v [T, Hkv, D].
    Tensor residual = ops_.empty({T, H}, act_dt);
    Tensor h = ops_.empty({T, H}, act_dt);
    Tensor qkv = ops_.empty({T, (Hq + 2 * Hkv) * D}, act_dt);
    Tensor qkv_rows = qkv.reshape({T * per_token, Hkv * D});
    Tensor q = ops_.empty({T, Hq * D}, act_dt);
    Tensor k = ops_.empty({T, Hkv * D}, act_dt);
    Tensor v = ops_.empty({T, Hkv * D}, act_dt);
    Tensor attn_out = ops_.empty({T, Hq * D}, act_dt);
    Tensor proj = ops_.empty({T, H}, act_dt);
    Tensor gate_up = ops_.empty({T, 2 * I}, act_dt);
    Tensor act = ops_.empty({T, I}, act_dt);
    const Tensor none;

    const bool graph = b.graph_key != 0;
    LOOM_CHECK(!graph || (device_logits && dump == nullptr && N == 0 && !mrope))
        << "graph forwards are text-only and keep logits on the device";
    if (graph) ops_.graph_begin(b.graph_key);
    if (N == 0) {
      ops_.embedding(embed_, b.token_ids, residual);
    } else {
      Tensor x = ops_.empty({T + N, H}, act_dt);
      Tensor x_text = x.slice_rows(0, T), x_mm = x.slice_rows(T, T + N);
      ops_.embedding(embed_, b.token_ids, x_text);
      ops_.embedding(ops_.upload_scratch(b.mm_embeds),
                     std::span<const int32_t>(iota).first(static_cast<size_t>(N)), x_mm);
      ops_.embedding(x, mm_perm, residual);
    }
    emit("embed", residual);
    // Ends layer `done`: residual += its MLP output (+ its DeepStack rows), then the next norm.
    auto close_layer = [&](size_t done, const Tensor& norm_weight) {
      if (done < b.deepstack_embeds.size()) {
        ops_.add_inplace(residual, proj);
        emit("blk." + std::to_string(done) + ".out", residual);  // the layer's output, as transformers'
        const Tensor& d = b.deepstack_embeds[done];
        Tensor padded = Tensor::empty({N + 1, H}, act_dt);  // row 0: zeros for the text rows
        std::memset(padded.data(), 0, padded.nbytes() / static_cast<size_t>(N + 1));
        std::memcpy(static_cast<char*>(padded.data()) + padded.nbytes() / static_cast<size_t>(N + 1),
                    d.data(), d.nbytes());
        Tensor rows = ops_.empty({T, H}, act_dt);
        ops_.embedding(ops_.upload_scratch(padded), ds_perm, rows);
        ops_.add_inplace(residual, rows);
        emit("blk." + std::to_string(done) + ".deepstack", residual);
        ops_.rms_norm(residual, norm_weight, eps, h);
      } else {
        ops_.add_rms_norm(residual, proj, norm_weight, eps, h);
        emit("blk." + std::to_string(done) + ".out", residual);
      }
    };
    for (size_t li = 0; li < layers_.size(); ++li) {
      const LayerWeights& L = layers_[li];
      const std::string blk = "blk." + std::to_string(li);
      attn.sliding_window = layer_window_[li];
      if (li == 0) {
        ops_.rms_norm(residual, L.input_norm, eps, h);
      } else {
        close_layer(li - 1, L.input_norm);  // proj = previous MLP output
      }
      ops_.linear(h, L.w_qkv, L.b_qkv, qkv);
      Tensor q_split = q.reshape({T * group, Hkv * D});
      Tensor k_split = k.reshape({T, Hkv * D});
      Tensor v_split = v.reshape({T, Hkv * D});
      ops_.embedding(qkv_rows, q_rows, q_split);
      ops_.embedding(qkv_rows, k_rows, k_split);
      ops_.embedding(qkv_rows, v_rows, v_split);
      Tensor q3 = q.reshape({T, Hq, D});
      Tensor k3 = k.reshape({T, Hkv, D});
      if (cfg_.qk_norm) {  // per-head RMSNorm over head_dim, before rotary
        Tensor qr = q.reshape({T * Hq, D});
        Tensor kr = k.reshape({T * Hkv, D});
        ops_.rms_norm(qr, L.q_norm, eps, qr);
        ops_.rms_norm(kr, L.k_norm, eps, kr);
      }
      ops_.rope(q3, rope_pos, rope_cos, rope_sin, rope_params);
      ops_.rope(k3, rope_pos, rope_cos, rope_sin, rope_params);
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
    close_layer(layers_.size() - 1, final_norm_);
    emit("final_norm", h);

    const auto n = static_cast<int64_t>(b.logits_rows.size());
    for (int32_t r : b.logits_rows) LOOM_CHECK(r >= 0 && r < T) << "logits row " << r << " of " << T;
    if (n == 0) {
      if (graph) ops_.graph_end(b.graph_key);
      logits = Tensor::empty({0, cfg_.vocab_size}, DType::kF32);
      return {};
    }
    Tensor rows = ops_.empty({n, H}, act_dt);
    ops_.embedding(h, b.logits_rows, rows);  // gathers the rows whose logits are wanted
    Tensor out = ops_.empty({n, cfg_.vocab_size}, DType::kF32);
    ops_.linear(rows, lm_head_, none, out);
    if (graph) ops_.graph_end(b.graph_key);
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
  Tensor rope_host_cos_, rope_host_sin_;  // host copies, for per-token M-RoPE tables
  std::vector<uint8_t> mrope_row_;        // [rotary_dim / 2] section row of each pair; empty: 1-D
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
