// A small fixed-size thread pool for data-parallel kernels: parallel_for hands out task
// indices dynamically to the calling thread and num_threads()-1 workers, and returns
// when every task has finished.
//
// A job completes when its tasks are done, not when every worker has checked in, so a
// worker that the OS has not scheduled yet (oversubscribed or shared machine) never
// delays a job; it simply finds no task left. Tasks are claimed through one atomic word
// holding (job generation, next task), so a late worker can never run another job's task.
// Idle workers poll briefly (pause, then yield) before sleeping on a condition variable,
// so the many short parallel_for calls of a decode step do not each pay a futex wake-up.
// Concurrent parallel_for callers are serialised; a parallel_for issued from inside a
// task runs inline on that thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace loom::backends::cpu {

class ThreadPool {
 public:
  using Fn = std::function<void(int64_t task, int thread)>;

  // num_threads counts the calling thread; 0 = std::thread::hardware_concurrency().
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(task, thread) for every task in [0, num_tasks) (at most 2^32 - 1);
  // `thread` is in [0, num_threads()) and identifies the executing thread (for
  // per-thread scratch). Tasks must not throw.
  void parallel_for(int64_t num_tasks, const Fn& fn);

 private:
  void worker_loop(int thread);
  // Claims and runs tasks of job `gen` until none are left.
  void run_job(uint32_t gen, const Fn& fn, int64_t num_tasks, int thread);

  std::vector<std::thread> workers_;
  std::mutex call_mu_;  // serialises parallel_for callers

  std::mutex mu_;  // guards the job description below and stop_
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  bool stop_ = false;
  uint32_t gen_ = 0;
  const Fn* fn_ = nullptr;
  int64_t num_tasks_ = 0;

  std::atomic<uint32_t> published_gen_{0};  // gen_, readable without the lock (polling)
  std::atomic<uint64_t> claim_{0};          // (gen << 32) | next unclaimed task
  std::atomic<int64_t> done_{0};            // finished tasks of the current job
};

}  // namespace loom::backends::cpu
