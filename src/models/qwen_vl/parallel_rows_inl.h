// Implementation of parallel_for_rows (declared in resize.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

namespace loom::models::qwen_vl {

template <typename Fn>
void parallel_for_rows(int64_t n, int num_threads, Fn&& fn) {
  if (n <= 0) return;
  int64_t threads = num_threads > 0 ? num_threads : std::max(1u, std::thread::hardware_concurrency());
  // Small jobs are not worth a thread start (~tens of microseconds).
  threads = std::min<int64_t>(threads, std::max<int64_t>(1, n / 8));
  if (threads <= 1) {
    fn(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads - 1));
  const int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t begin = t * chunk;
    const int64_t end = std::min(n, begin + chunk);
    if (begin >= end) break;
    pool.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  fn(int64_t{0}, std::min(n, chunk));
  for (auto& th : pool) th.join();
}

}  // namespace loom::models::qwen_vl
