// CpuBackend::paged_attention: splits a flattened batch into tiles and runs them on the
// pool.
//
// A tile is (sequence, kv head, up to `tile_rows` consecutive query tokens) with all
// the q heads of that kv head's GQA group, so each K/V chunk read from the cache serves
// rows * group query vectors while it is in L1. Decode batches with few sequences and
// long contexts yield fewer tiles than threads; then each tile's key range is split
// into parts (flash-decoding) whose partial (max, sum, acc) are merged afterwards.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "core/check.h"

namespace loom::backends::cpu {

namespace {

// Query vectors (rows x group heads) per tile.
constexpr int64_t kTileQueryVectors = 16;
// A key-range part is never shorter than this (merging costs ~ one chunk's work).
constexpr int64_t kMinKeysPerPart = 256;

struct Tile {
  int32_t seq = 0, kv_head = 0;
  int64_t row0 = 0;  // first query token (global row of q / out)
  int32_t rows = 0;
  int32_t first_qpos = 0;
  int32_t key_begin = 0, key_end = 0;
  int32_t parts = 1;
  int64_t partial_offset = 0;  // into the partials buffer (parts > 1)
};

struct Task {
  int32_t tile = 0, part = 0;
  int32_t key_begin = 0, key_end = 0;
  int64_t cost = 0;
};

}  // namespace

void CpuBackend::paged_attention(const AttentionDesc& d) {
  LOOM_CHECK(d.kv_heads > 0 && d.q_heads % d.kv_heads == 0 && d.block_size > 0)
      << "attention q_heads " << d.q_heads << " kv_heads " << d.kv_heads << " block_size " << d.block_size;
  const int64_t group = d.q_heads / d.kv_heads;
  const int64_t D = d.head_dim;
  const int64_t tile_rows = std::max<int64_t>(1, kTileQueryVectors / group);

  std::vector<Tile> tiles;
  for (int32_t s = 0; s < d.num_seqs; ++s) {
    const int64_t q_begin = d.q_indptr[s], q_len = d.q_indptr[s + 1] - q_begin, kv_len = d.kv_lens[s];
    LOOM_CHECK(q_len >= 0 && kv_len >= q_len)
        << "attention sequence " << s << " q_len " << q_len << " kv_len " << kv_len;
    for (int64_t r0 = 0; r0 < q_len; r0 += tile_rows) {
      const auto rows = static_cast<int32_t>(std::min(tile_rows, q_len - r0));
      const int64_t first_qpos = kv_len - q_len + r0, last_qpos = first_qpos + rows - 1;
      Tile t;
      t.seq = s;
      t.row0 = q_begin + r0;
      t.rows = rows;
      t.first_qpos = static_cast<int32_t>(first_qpos);
      t.key_begin = static_cast<int32_t>(
          d.sliding_window > 0 ? std::max<int64_t>(0, first_qpos - d.sliding_window + 1) : 0);
      t.key_end = static_cast<int32_t>(d.causal ? last_qpos + 1 : kv_len);
      for (int32_t g = 0; g < d.kv_heads; ++g) {
        t.kv_head = g;
        tiles.push_back(t);
      }
    }
  }
  if (tiles.empty()) return;

  // Split key ranges when the tiles alone cannot keep every thread busy.
  const int64_t threads = pool_.num_threads();
  const int64_t want_tasks = 4 * threads;
  const int64_t split =
      threads > 1 && static_cast<int64_t>(tiles.size()) < want_tasks
          ? (want_tasks + static_cast<int64_t>(tiles.size()) - 1) / static_cast<int64_t>(tiles.size())
          : 1;
  std::vector<Task> tasks;
  int64_t partial_floats = 0;
  for (size_t i = 0; i < tiles.size(); ++i) {
    Tile& t = tiles[i];
    const int64_t keys = t.key_end - t.key_begin;
    t.parts = static_cast<int32_t>(std::clamp<int64_t>(keys / kMinKeysPerPart, 1, split));
    const int64_t nq = int64_t{t.rows} * group;
    if (t.parts > 1) {
      t.partial_offset = partial_floats;
      partial_floats += t.parts * nq * (D + 2);
    }
    const int64_t per = (keys + t.parts - 1) / t.parts;
    for (int32_t p = 0; p < t.parts; ++p) {
      Task task;
      task.tile = static_cast<int32_t>(i);
      task.part = p;
      task.key_begin = static_cast<int32_t>(t.key_begin + p * per);
      task.key_end = static_cast<int32_t>(std::min<int64_t>(t.key_end, t.key_begin + (p + 1) * per));
      task.cost = nq * (task.key_end - task.key_begin);
      tasks.push_back(task);
    }
  }
  // Longest first, so the dynamic schedule ends evenly.
  std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) { return a.cost > b.cost; });

  if (partials_.size() < static_cast<size_t>(partial_floats))
    partials_.resize(static_cast<size_t>(partial_floats));
  const auto scratch_floats = static_cast<size_t>(attention_scratch_floats(tile_rows * group, D));
  for (auto& s : thread_scratch_)
    if (s.size() < scratch_floats) s.resize(scratch_floats);

  pool_.parallel_for(static_cast<int64_t>(tasks.size()), [&](int64_t ti, int thread) {
    const Task& task = tasks[static_cast<size_t>(ti)];
    const Tile& t = tiles[static_cast<size_t>(task.tile)];
    AttentionTileArgs a;
    a.q = d.q + (t.row0 * d.q_heads + int64_t{t.kv_head} * group) * D;
    a.q_row_stride = d.q_heads * D;
    a.rows = t.rows;
    a.heads = static_cast<int32_t>(group);
    a.head_dim = static_cast<int32_t>(D);
    a.first_qpos = t.first_qpos;
    a.kv_len = d.kv_lens[t.seq];
    a.causal = d.causal;
    a.window = d.sliding_window;
    a.scale = d.scale;
    a.key_begin = task.key_begin;
    a.key_end = task.key_end;
    a.k_cache = d.k_cache;
    a.v_cache = d.v_cache;
    a.cache_type = d.cache_type;
    a.kv_head = t.kv_head;
    a.kv_heads = static_cast<int32_t>(d.kv_heads);
    a.block_size = d.block_size;
    a.block_table = d.block_table + int64_t{t.seq} * d.max_blocks_per_seq;
    a.scratch = thread_scratch_[static_cast<size_t>(thread)].data();
    if (t.parts > 1) {
      const int64_t nq = int64_t{t.rows} * group;
      float* base = partials_.data() + t.partial_offset + int64_t{task.part} * nq * (D + 2);
      a.part_acc = base;
      a.part_max = base + nq * D;
      a.part_sum = base + nq * D + nq;
    } else {
      a.out = d.out + (t.row0 * d.q_heads + int64_t{t.kv_head} * group) * D;
      a.out_row_stride = d.q_heads * D;
    }
    kernels_->attention_tile(a);
  });

  if (partial_floats == 0) return;
  // Merge split tiles: out = sum_p acc_p e^(m_p - M) / sum_p l_p e^(m_p - M), M = max_p m_p.
  pool_.parallel_for(static_cast<int64_t>(tiles.size()), [&](int64_t ti, int) {
    const Tile& t = tiles[static_cast<size_t>(ti)];
    if (t.parts <= 1) return;
    const int64_t nq = int64_t{t.rows} * group;
    const float* base = partials_.data() + t.partial_offset;
    auto part = [&](int32_t p) { return base + int64_t{p} * nq * (D + 2); };
    for (int64_t qi = 0; qi < nq; ++qi) {
      float m = -std::numeric_limits<float>::infinity();
      for (int32_t p = 0; p < t.parts; ++p) m = std::max(m, part(p)[nq * D + qi]);
      float sum = 0.0f;
      float* out = d.out + ((t.row0 + qi / group) * d.q_heads + int64_t{t.kv_head} * group + qi % group) * D;
      std::fill(out, out + D, 0.0f);
      for (int32_t p = 0; p < t.parts; ++p) {
        const float mp = part(p)[nq * D + qi];
        if (mp == -std::numeric_limits<float>::infinity()) continue;  // no visible key in this part
        const float w = std::exp(mp - m);
        sum += part(p)[nq * D + nq + qi] * w;
        const float* acc = part(p) + qi * D;
        for (int64_t e = 0; e < D; ++e) out[e] += acc[e] * w;
      }
      const float inv = 1.0f / sum;
      for (int64_t e = 0; e < D; ++e) out[e] *= inv;
    }
  });
}

}  // namespace loom::backends::cpu
