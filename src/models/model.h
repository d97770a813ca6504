// The interface the engine drives: one forward over a batch of sequences whose new tokens
// are flattened into one token dimension, with KV history in paged caches (ops/ops.h).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"
#include "models/config/model_config.h"
#include "models/multimodal.h"
#include "ops/ops.h"
#include "text/tokenizer.h"

namespace loom::models {

// One decoder layer's paged KV memory: [num_blocks, block_size, kv_heads, head_dim] each.
// Owned by the runner (engine); models only read and write through block tables.
struct LayerKv {
  core::Tensor k;
  core::Tensor v;
};

struct ForwardBatch {
  std::vector<int32_t> token_ids;     // [T] new tokens of every sequence, sequence after sequence
  std::vector<int32_t> positions;     // [T] position of each token in its sequence
  std::vector<int32_t> slot_mapping;  // [T] flat KV slot (block * block_size + offset) per token
  std::vector<int32_t> q_indptr;      // [S + 1]
  std::vector<int32_t> kv_lens;       // [S] context length after this step
  std::vector<int32_t> block_table;   // [S * max_blocks_per_seq]
  int32_t max_blocks_per_seq = 0;
  int32_t block_size = 16;
  std::vector<int32_t> logits_rows;  // token rows (into [T]) whose logits are wanted, in order
  // Upper bound of kv_lens the attention may plan for (0: their maximum). Fixed per graph.
  int32_t max_kv_len_bound = 0;
  // Non-zero: the caller promises that every forward with this key has the same shapes (T,
  // sequences, max_blocks_per_seq, logits rows, bound), so a device backend may capture it
  // into a graph and replay it (ops::Ops::graph_begin). Only with device_logits and no dump.
  uint64_t graph_key = 0;

  // Multimodal prompts (all empty for text).
  // M-RoPE: [3 * T] positions, the t row, then h, then w, when some token's three positions
  // differ (vision tokens in this step); empty: `positions` serves all three sections.
  std::vector<int32_t> mrope_positions;
  // Encoder embeddings that replace the token embedding at token rows mm_rows ([N] into [T]):
  // [N, hidden] in the backend's activation dtype, on the host (as encode_multimodal returns them).
  core::Tensor mm_embeds;
  std::vector<int32_t> mm_rows;
  // DeepStack (Qwen3-VL): deepstack_embeds[i] [N, hidden] is added to the hidden state after
  // decoder layer i at the rows mm_rows, as transformers' _deepstack_process does.
  std::vector<core::Tensor> deepstack_embeds;
};

// Called with every named intermediate tensor ("embed", "blk.3.out", "final_norm", ...) when
// set; lets a run be compared with transformers layer by layer.
using DumpHook = std::function<void(std::string_view name, const core::Tensor& t)>;

// Weight storage on the CPU: keep the checkpoint's dtype, or upcast to f32 at load.
enum class WeightDType { kAuto, kF32, kBF16 };

struct LoadOptions {
  WeightDType weight_dtype = WeightDType::kAuto;
  std::string model_dir;  // the checkpoint folder (processor configs); load_causal_lm sets it
  int num_threads = 0;    // CPU threads for preprocessing (0: all)
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const TextConfig& text_config() const = 0;
  // KV heads and head_dim of the paged caches this model needs per layer.
  virtual int64_t num_layers() const = 0;
  virtual int64_t num_kv_heads() const = 0;
  virtual int64_t head_dim() const = 0;
  virtual int64_t vocab_size() const = 0;
  // Allocates paged KV memory on the model's device, in its activation dtype.
  virtual std::vector<LayerKv> allocate_kv(int64_t num_blocks, int32_t block_size) = 0;
  // Runs the batch; writes logits [logits_rows.size(), vocab] (f32) into `logits`: on the host,
  // or, with device_logits, where the backend computed them (valid until the next forward).
  virtual core::Status forward(const ForwardBatch& batch, std::vector<LayerKv>& kv, core::Tensor& logits,
                               const DumpHook* dump = nullptr, bool device_logits = false) = 0;
  // The op backend the model runs on (for sampling on its device).
  virtual ops::Ops& backend() = 0;

  // Vision-language families: expands the rendered prompt's placeholders for `items` (in order of
  // appearance), tokenizes it, computes positions and runs the encoders (multimodal.h). Text-only
  // models: Unsupported. Errors name the offending item.
  virtual core::Expected<MultimodalPrompt> prepare_multimodal(const std::string& prompt,
                                                              const text::Tokenizer& tokenizer,
                                                              std::span<const MediaItem> items) {
    return core::unsupported("this model takes text only (" + text_config().model_type + ")");
  }
  // Whether the model positions tokens with M-RoPE (decode positions then carry a rope delta).
  virtual bool multimodal() const { return false; }
};

}  // namespace loom::models
