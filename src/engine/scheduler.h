// Decides, each step, how many tokens each sequence computes: running sequences first
// (decode, or the rest of a chunked prefill), then waiting ones, under a token budget and a
// sequence cap. Preempts the most recently started sequence (freeing its KV blocks, to be
// recomputed later) when blocks run out. Pure CPU code, unit-tested without a model.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace loom::engine {

struct SchedulerConfig {
  int32_t max_num_batched_tokens = 2048;  // token budget per step (prefill chunks + decodes)
  int32_t max_num_seqs = 256;             // sequences per step
};

struct ScheduledSeq {
  Sequence* seq = nullptr;
  int64_t num_tokens = 0;  // computes tokens [seq->num_computed, seq->num_computed + num_tokens)
  bool samples() const { return seq->num_computed + num_tokens == seq->total_len(); }
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> scheduled;
  int64_t num_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(SchedulerConfig config, BlockManager& blocks) : config_(config), blocks_(blocks) {}

  void add(Sequence* seq) { waiting_.push_back(seq); }
  // Forgets a sequence (finished or aborted) and frees its blocks.
  void remove(Sequence* seq);
  SchedulerOutput schedule();
  // Records that the scheduled tokens were computed.
  void commit(const SchedulerOutput& out);

  bool empty() const { return waiting_.empty() && running_.empty(); }
  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  int64_t num_preemptions() const { return preemptions_; }

 private:
  void preempt(Sequence* seq);

  SchedulerConfig config_;
  BlockManager& blocks_;
  std::deque<Sequence*> waiting_;
  std::vector<Sequence*> running_;
  int64_t preemptions_ = 0;
};

}  // namespace loom::engine
