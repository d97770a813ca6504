#include "text/bpe.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>

#include "text/tokenizer_unicode.h"

namespace loom::text::detail {

namespace {

// Per-thread cache of word -> ids. Flat storage: keys in one string, ids in one vector, slots in an
// open-addressing table; cleared wholesale when full (the working set of natural text is small).
class WordCache {
 public:
  static constexpr size_t kSlots = size_t{1} << 17;
  static constexpr size_t kMaxEntries = kSlots / 2;
  static constexpr size_t kMaxKeyBytes = 256;  // longer words are not cached

  WordCache() : slots_(kSlots) {}

  bool find(std::string_view key, uint64_t h, std::vector<int32_t>* out) const {
    for (size_t i = h & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
      const Slot& s = slots_[i];
      if (s.key_len == 0) return false;
      if (s.hash == h && s.key_len == key.size() &&
          std::memcmp(keys_.data() + s.key_off, key.data(), key.size()) == 0) {
        out->insert(out->end(), ids_.begin() + s.ids_off, ids_.begin() + s.ids_off + s.ids_len);
        return true;
      }
    }
  }

  void insert(std::string_view key, uint64_t h, const int32_t* ids, size_t n) {
    if (key.empty() || key.size() > kMaxKeyBytes) return;
    if (count_ >= kMaxEntries) clear();
    size_t i = h & (kSlots - 1);
    while (slots_[i].key_len != 0) i = (i + 1) & (kSlots - 1);
    Slot& s = slots_[i];
    s.hash = h;
    s.key_off = static_cast<uint32_t>(keys_.size());
    s.key_len = static_cast<uint32_t>(key.size());
    s.ids_off = static_cast<uint32_t>(ids_.size());
    s.ids_len = static_cast<uint32_t>(n);
    keys_.append(key);
    ids_.insert(ids_.end(), ids, ids + n);
    ++count_;
  }

  void clear() {
    std::fill(slots_.begin(), slots_.end(), Slot{});
    keys_.clear();
    ids_.clear();
    count_ = 0;
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t key_off = 0, key_len = 0;  // key_len == 0 marks an empty slot
    uint32_t ids_off = 0, ids_len = 0;
  };
  std::vector<Slot> slots_;
  std::string keys_;
  std::vector<int32_t> ids_;
  size_t count_ = 0;
};

// A thread keeps caches for the few models it used last (a server typically has one).
WordCache& thread_word_cache(uint64_t owner) {
  struct Entry {
    uint64_t owner = 0;
    uint64_t last_use = 0;
    std::unique_ptr<WordCache> cache;
  };
  thread_local Entry entries[4];
  thread_local uint64_t tick = 0;
  ++tick;
  Entry* victim = &entries[0];
  for (Entry& e : entries) {
    if (e.owner == owner && e.cache) {
      e.last_use = tick;
      return *e.cache;
    }
    if (e.last_use < victim->last_use) victim = &e;
  }
  if (victim->cache) {
    victim->cache->clear();
  } else {
    victim->cache = std::make_unique<WordCache>();
  }
  victim->owner = owner;
  victim->last_use = tick;
  return *victim->cache;
}

std::atomic<uint64_t> next_cache_owner{1};

// One symbol of a word being merged (tokenizers' models/bpe/word.rs Symbol).
struct Symbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  int32_t len;   // 0 once merged into its left neighbour
};

struct HeapEntry {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
};
// std heap functions build a max-heap; "greater" puts the lowest (rank, pos) on top.
inline bool heap_after(const HeapEntry& a, const HeapEntry& b) {
  return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
}

}  // namespace

core::Expected<BpeModel> BpeModel::create(BpeConfig config) {
  BpeModel m;
  m.vocab_ = std::move(config.vocab);
  m.prefix_ = std::move(config.continuing_subword_prefix);
  m.suffix_ = std::move(config.end_of_word_suffix);
  m.fuse_unk_ = config.fuse_unk;
  m.byte_fallback_ = config.byte_fallback;
  m.ignore_merges_ = config.ignore_merges;
  m.byte_level_ = config.byte_level_input;
  if (config.unk_token) {
    m.unk_id_ = m.vocab_.find(*config.unk_token);
    if (!m.unk_id_)
      return core::invalid_argument("BPE unk_token '" + *config.unk_token + "' is not in the vocab");
  }

  size_t slots = 16;
  while (slots < config.merges.size() * 2) slots <<= 1;
  m.merge_table_.assign(slots, MergeSlot{});
  m.merge_mask_ = slots - 1;
  const size_t prefix_len = m.prefix_.size();
  std::string merged;
  for (size_t rank = 0; rank < config.merges.size(); ++rank) {
    const auto& [a, b] = config.merges[rank];
    const auto ia = m.vocab_.find(a);
    const auto ib = m.vocab_.find(b);
    if (!ia || !ib) {
      return core::invalid_argument("BPE merge #" + std::to_string(rank) + " '" + a + " " + b +
                                    "' uses a token that is not in the vocab");
    }
    if (b.size() < prefix_len) {
      return core::invalid_argument("BPE merge #" + std::to_string(rank) + " right side '" + b +
                                    "' is shorter than continuing_subword_prefix");
    }
    merged.assign(a);
    merged.append(std::string_view(b).substr(prefix_len));
    const auto im = m.vocab_.find(merged);
    if (!im) {
      return core::invalid_argument("BPE merge #" + std::to_string(rank) + " makes '" + merged +
                                    "', which is not in the vocab");
    }
    // A pair listed twice keeps its last rank (tokenizers collects the merges into a HashMap).
    m.insert_merge(*ia, *ib, static_cast<int32_t>(rank), *im);
  }

  if (m.byte_level_ && m.prefix_.empty() && m.suffix_.empty()) {
    const ByteLevelAlphabet& alpha = byte_level_alphabet();
    m.direct_bytes_ = true;
    for (int b = 0; b < 256; ++b) {
      const auto id = m.vocab_.find(alpha.byte_to_utf8[b]);
      if (!id) {
        m.direct_bytes_ = false;
        break;
      }
      m.byte_ids_[b] = *id;
    }
  }
  m.cache_owner_ = next_cache_owner.fetch_add(1);
  return m;
}

void BpeModel::insert_merge(int32_t left, int32_t right, int32_t rank, int32_t new_id) {
  const uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  for (uint64_t i = mix64(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    MergeSlot& s = merge_table_[i];
    if (s.key == key || s.key == ~uint64_t{0}) {
      s = MergeSlot{key, rank, new_id};
      return;
    }
  }
}

const BpeModel::MergeSlot* BpeModel::find_merge(int32_t left, int32_t right) const {
  const uint64_t key = (uint64_t(uint32_t(left)) << 32) | uint32_t(right);
  for (uint64_t i = mix64(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    const MergeSlot& s = merge_table_[i];
    if (s.key == key) return &s;
    if (s.key == ~uint64_t{0}) return nullptr;
  }
}

// tokenizers' BPE::merge_word before merging: one symbol per character (with the continuing
// prefix on all but the first and the suffix on the last), byte fallback or unk for characters
// outside the vocab (runs of unk fused when fuse_unk), dropped characters when there is no unk.
void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>* ids,
                               std::vector<int32_t>* lens) const {
  std::string piece;
  std::optional<std::pair<int32_t, int32_t>> pending_unk;  // (id, byte length)
  for (size_t i = 0; i < word.size();) {
    const int clen = utf8_len(static_cast<unsigned char>(word[i]));
    const bool first = i == 0, last = i + clen >= word.size();
    piece.clear();
    if (!first) piece += prefix_;
    piece.append(word.substr(i, clen));
    if (last) piece += suffix_;
    i += clen;
    if (const auto id = vocab_.find(piece)) {
      if (pending_unk) {
        ids->push_back(pending_unk->first);
        lens->push_back(pending_unk->second);
        pending_unk.reset();
      }
      ids->push_back(*id);
      lens->push_back(clen);
      continue;
    }
    if (byte_fallback_) {
      bool all = true;
      const size_t mark = ids->size();
      for (unsigned char b : piece) {
        char name[8];
        std::snprintf(name, sizeof(name), "<0x%02X>", b);
        const auto id = vocab_.find(name);
        if (!id) {
          all = false;
          break;
        }
        ids->push_back(*id);
        lens->push_back(1);
      }
      if (all) continue;
      ids->resize(mark);
      lens->resize(mark);
    }
    if (unk_id_) {
      if (pending_unk && fuse_unk_) {
        pending_unk->second += clen;
      } else {
        if (pending_unk) {
          ids->push_back(pending_unk->first);
          lens->push_back(pending_unk->second);
        }
        pending_unk = std::make_pair(*unk_id_, int32_t(clen));
      }
    }
  }
  if (pending_unk) {
    ids->push_back(pending_unk->first);
    lens->push_back(pending_unk->second);
  }
}

void BpeModel::encode_word_uncached(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  thread_local std::vector<Symbol> symbols;
  thread_local std::vector<HeapEntry> heap;
  thread_local std::vector<int32_t> ids, lens;
  thread_local std::string mapped;
  symbols.clear();
  heap.clear();

  std::string_view model_word = word;
  if (byte_level_ && (!direct_bytes_ || ignore_merges_)) {
    const ByteLevelAlphabet& alpha = byte_level_alphabet();
    mapped.clear();
    for (unsigned char b : word) mapped += alpha.byte_to_utf8[b];
    model_word = mapped;
  }
  if (ignore_merges_) {
    // A word that is itself a token is emitted whole, whatever the merges would make of it.
    if (const auto id = vocab_.find(model_word)) {
      out->push_back(*id);
      return;
    }
  }
  if (direct_bytes_) {
    const auto n = static_cast<int32_t>(word.size());
    symbols.resize(n);
    for (int32_t i = 0; i < n; ++i) {
      symbols[i] = Symbol{byte_ids_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1, 1};
    }
  } else {
    ids.clear();
    lens.clear();
    initial_symbols(model_word, &ids, &lens);
    const auto n = static_cast<int32_t>(ids.size());
    symbols.resize(n);
    for (int32_t i = 0; i < n; ++i) symbols[i] = Symbol{ids[i], i - 1, i + 1 < n ? i + 1 : -1, lens[i]};
  }

  const auto n = static_cast<int32_t>(symbols.size());
  for (int32_t i = 0; i + 1 < n; ++i) {
    if (const MergeSlot* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      heap.push_back({m->rank, i, m->new_id});
    }
  }
  std::make_heap(heap.begin(), heap.end(), heap_after);
  auto push = [&](HeapEntry e) {
    heap.push_back(e);
    std::push_heap(heap.begin(), heap.end(), heap_after);
  };
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), heap_after);
    const HeapEntry top = heap.back();
    heap.pop_back();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;  // merged away, or last symbol
    const int32_t right_pos = cur.next;
    const Symbol right = symbols[right_pos];
    // Skip stale entries: the pair at this position must still merge into the same token.
    const MergeSlot* m = find_merge(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[right_pos].len = 0;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const MergeSlot* pm = find_merge(symbols[cur.prev].id, cur.id))
        push({pm->rank, cur.prev, pm->new_id});
    }
    if (cur.next >= 0) {
      if (const MergeSlot* nm = find_merge(cur.id, symbols[cur.next].id))
        push({nm->rank, top.pos, nm->new_id});
    }
  }
  for (const Symbol& s : symbols) {
    if (s.len != 0) out->push_back(s.id);
  }
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (word.size() == 1 && direct_bytes_) {
    // One byte is one symbol: no merge can apply (and with ignore_merges it is its own token).
    out->push_back(byte_ids_[static_cast<unsigned char>(word[0])]);
    return;
  }
  WordCache& cache = thread_word_cache(cache_owner_);
  const uint64_t h = hash_bytes(word);
  if (cache.find(word, h, out)) return;
  const size_t before = out->size();
  encode_word_uncached(word, out);
  cache.insert(word, h, out->data() + before, out->size() - before);
}

}  // namespace loom::text::detail
