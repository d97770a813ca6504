// A flat string -> id map for vocabularies: keys live in one arena, slots in an open-addressing
// table, so a 150k-token vocabulary costs two allocations and lookups take a string_view.
// Internal to src/text/.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::text::detail {

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (s.size() * 0x100000001B3ull);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return mix64(h ^ tail);
}

class StringIdMap {
 public:
  size_t size() const { return count_; }

  void reserve(size_t n) {
    if (n * 2 > slots_.size()) rehash(n * 2);
  }

  // Sets the id of `key` (a later value for the same key replaces the earlier one, as in a JSON
  // object read into a map). Ids must be non-negative.
  void insert_or_assign(std::string_view key, int32_t id) {
    if ((count_ + 1) * 2 > slots_.size()) rehash(slots_.empty() ? 64 : slots_.size() * 2);
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      Slot& s = slots_[i];
      if (s.id < 0) {
        s = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()), id};
        arena_.append(key);
        ++count_;
        return;
      }
      if (s.hash == h && key_of(s) == key) {
        s.id = id;
        return;
      }
    }
  }

  std::optional<int32_t> find(std::string_view key) const {
    if (slots_.empty()) return std::nullopt;
    const uint64_t h = hash_bytes(key);
    for (size_t i = h & (slots_.size() - 1);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.id < 0) return std::nullopt;
      if (s.hash == h && key_of(s) == key) return s.id;
    }
  }

  // f(std::string_view key, int32_t id) for every entry, in no particular order.
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.id >= 0) f(key_of(s), s.id);
    }
  }

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t offset = 0, length = 0;  // of the key in arena_
    int32_t id = -1;                  // -1 marks an empty slot
  };

  std::string_view key_of(const Slot& s) const { return std::string_view(arena_).substr(s.offset, s.length); }

  void rehash(size_t min_slots) {
    size_t n = 64;
    while (n < min_slots) n <<= 1;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(n, Slot{});
    for (const Slot& s : old) {
      if (s.id < 0) continue;
      size_t i = s.hash & (n - 1);
      while (slots_[i].id >= 0) i = (i + 1) & (n - 1);
      slots_[i] = s;
    }
  }

  std::vector<Slot> slots_;
  std::string arena_;
  size_t count_ = 0;
};

}  // namespace loom::text::detail
