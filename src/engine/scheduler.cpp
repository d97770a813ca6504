#include "engine/scheduler.h"

#include <algorithm>

#include "core/check.h"

namespace loom::engine {

void Scheduler::remove(Sequence* seq) {
  blocks_.release(seq->blocks);
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), seq), waiting_.end());
}

void Scheduler::preempt(Sequence* seq) {
  blocks_.release(seq->blocks);
  seq->num_computed = 0;  // recomputed from scratch (prompt + output so far) when resumed
  running_.erase(std::remove(running_.begin(), running_.end(), seq), running_.end());
  waiting_.push_front(seq);
  ++preemptions_;
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int64_t budget = config_.max_num_batched_tokens;

  // Running sequences, oldest first; the newest are preempted when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence* seq = running_[i];
    const int64_t grant = std::min(seq->total_len() - seq->num_computed, budget);
    LOOM_CHECK(grant > 0) << "running sequence " << seq->id << " has nothing to compute";
    if (blocks_.ensure_capacity(seq->blocks, seq->num_computed + grant)) {
      out.scheduled.push_back({seq, grant});
      budget -= grant;
      ++i;
      continue;
    }
    // Out of blocks: preempt the newest running sequence that is not yet scheduled.
    Sequence* victim = running_.back();
    preempt(victim);
    if (victim == seq) break;
  }

  // Then admit waiting sequences while there is budget, room and memory.
  while (!waiting_.empty() && budget > 0 && running_.size() < static_cast<size_t>(config_.max_num_seqs)) {
    Sequence* seq = waiting_.front();
    const int64_t grant = std::min(seq->total_len() - seq->num_computed, budget);
    if (!blocks_.ensure_capacity(seq->blocks, seq->num_computed + grant)) break;
    waiting_.pop_front();
    running_.push_back(seq);
    out.scheduled.push_back({seq, grant});
    budget -= grant;
  }
  out.num_tokens = config_.max_num_batched_tokens - budget;
  return out;
}

void Scheduler::commit(const SchedulerOutput& out) {
  for (const auto& s : out.scheduled) s.seq->num_computed += s.num_tokens;
}

}  // namespace loom::engine
