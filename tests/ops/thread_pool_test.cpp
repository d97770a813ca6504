#include "backends/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace loom::backends::cpu {
namespace {

TEST(ThreadPool, RunsEveryTaskExactlyOnceWithValidThreadIds) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    ASSERT_EQ(pool.num_threads(), threads);
    for (int64_t tasks : {0, 1, 2, 7, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(tasks));
      std::atomic<bool> bad_thread{false};
      pool.parallel_for(tasks, [&](int64_t t, int thread) {
        hits[static_cast<size_t>(t)].fetch_add(1);
        if (thread < 0 || thread >= threads) bad_thread = true;
      });
      for (int64_t t = 0; t < tasks; ++t)
        EXPECT_EQ(hits[static_cast<size_t>(t)].load(), 1) << threads << " " << t;
      EXPECT_FALSE(bad_thread.load());
    }
  }
}

TEST(ThreadPool, ManyShortJobsBackToBack) {
  // Exercises the spin / sleep hand-off between consecutive jobs.
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 20000; ++job) pool.parallel_for(5, [&](int64_t t, int) { sum.fetch_add(t + 1); });
  EXPECT_EQ(sum.load(), 20000 * 15);
}

TEST(ThreadPool, NestedCallsRunInlineAndConcurrentCallersSerialise) {
  ThreadPool pool(3);
  std::atomic<int64_t> inner{0};
  pool.parallel_for(6,
                    [&](int64_t, int) { pool.parallel_for(4, [&](int64_t, int) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 24);
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 3; ++c)
    callers.emplace_back([&] {
      for (int j = 0; j < 200; ++j) pool.parallel_for(10, [&](int64_t, int) { total.fetch_add(1); });
    });
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 200 * 10);
}

}  // namespace
}  // namespace loom::backends::cpu
