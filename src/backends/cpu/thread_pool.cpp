#include "backends/cpu/thread_pool.h"

#include <chrono>

#include "core/check.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace loom::backends::cpu {

namespace {

// Idle polling: pause-spin for kSpinPause (covers the gap between consecutive ops of a
// forward pass), then yield-spin until kSpinYield (lets other runnable threads have the
// core on a shared machine), then sleep.
constexpr auto kSpinPause = std::chrono::microseconds(30);
constexpr auto kSpinYield = std::chrono::microseconds(300);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `ready` with the schedule above; returns whether it became true.
template <class Pred>
bool poll(Pred ready) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) != 63) {
      cpu_relax();
      continue;
    }
    const auto waited = std::chrono::steady_clock::now() - start;
    if (waited > kSpinYield) return false;
    if (waited > kSpinPause) std::this_thread::yield();
  }
}

constexpr uint64_t kTaskMask = 0xffffffffu;

thread_local bool t_inside_pool_task = false;

}  // namespace

ThreadPool::ThreadPool(int num_threads) {
  if (num_threads <= 0) num_threads = static_cast<int>(std::thread::hardware_concurrency());
  if (num_threads <= 0) num_threads = 1;
  workers_.reserve(static_cast<size_t>(num_threads - 1));
  for (int t = 1; t < num_threads; ++t) workers_.emplace_back([this, t] { worker_loop(t); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_job(uint32_t gen, const Fn& fn, int64_t num_tasks, int thread) {
  const bool was_inside = t_inside_pool_task;
  t_inside_pool_task = true;
  for (;;) {
    uint64_t c = claim_.load(std::memory_order_acquire);
    for (;;) {
      if ((c >> 32) != gen || static_cast<int64_t>(c & kTaskMask) >= num_tasks) {
        t_inside_pool_task = was_inside;
        return;
      }
      if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel)) break;
    }
    fn(static_cast<int64_t>(c & kTaskMask), thread);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == num_tasks) {
      std::lock_guard<std::mutex> lk(mu_);
      done_cv_.notify_all();
    }
  }
}

void ThreadPool::parallel_for(int64_t num_tasks, const Fn& fn) {
  if (num_tasks <= 0) return;
  if (workers_.empty() || num_tasks == 1 || t_inside_pool_task) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t, 0);
    return;
  }
  LOOM_CHECK(static_cast<uint64_t>(num_tasks) < kTaskMask) << "parallel_for with " << num_tasks << " tasks";
  std::lock_guard<std::mutex> call_lock(call_mu_);
  uint32_t gen;
  {
    std::lock_guard<std::mutex> lk(mu_);
    gen = ++gen_;
    fn_ = &fn;
    num_tasks_ = num_tasks;
    done_.store(0, std::memory_order_relaxed);
    claim_.store(uint64_t{gen} << 32, std::memory_order_release);
    published_gen_.store(gen, std::memory_order_release);
  }
  work_cv_.notify_all();
  run_job(gen, fn, num_tasks, 0);
  auto finished = [&] { return done_.load(std::memory_order_acquire) == num_tasks; };
  if (!poll(finished)) {
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, finished);
  }
}

void ThreadPool::worker_loop(int thread) {
  uint32_t seen = 0;
  for (;;) {
    poll([&] { return published_gen_.load(std::memory_order_acquire) != seen; });
    uint32_t gen;
    const Fn* fn;
    int64_t num_tasks;
    {
      std::unique_lock<std::mutex> lk(mu_);
      work_cv_.wait(lk, [&] { return stop_ || gen_ != seen; });
      if (stop_) return;
      // Read the job under the lock: if we woke late this may already be a newer job,
      // which is fine; its claim word only hands out its own tasks.
      gen = seen = gen_;
      fn = fn_;
      num_tasks = num_tasks_;
    }
    run_job(gen, *fn, num_tasks, thread);
  }
}

}  // namespace loom::backends::cpu
