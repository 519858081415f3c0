/// \file host/thread_pool.hpp
/// `thread_pool`: worker threads that a caller creates once and lends to every call that can use
/// several threads (quantize_into, dequantize, the GEMMs), so that steady-state calls start no
/// thread and allocate nothing. The one place where the host code starts threads.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace blockscale {
inline namespace v0 {

/// A fixed set of threads running one job at a time. `run(items, body)` splits [0, items) into
/// size() contiguous ranges, the same split for the same (items, size()), and runs
/// body(worker, begin, end) for each, the calling thread taking range 0; it returns when all are
/// done, rethrowing the first exception a range threw. A job allocates nothing. Calls of `run`
/// from several threads take turns; `body` must not call `run` on the same pool.
class thread_pool {
public:
  /// The most threads a pool (or a `threads` option) may ask for.
  static constexpr unsigned max_threads = 1024;

  /// `threads` in all, the caller included (0: std::thread::hardware_concurrency()). Throws
  /// std::invalid_argument above max_threads, and std::runtime_error, having stopped the threads
  /// it started, when the system refuses to start one.
  explicit thread_pool(unsigned threads = 0) : size_(resolve(threads)) {
    workers_.reserve(size_ - 1);
    try {
      for (unsigned w = 1; w < size_; ++w)
        workers_.emplace_back([this, w] { work(w); });
    } catch (const std::system_error& error) {
      stop();
      throw std::runtime_error("blockscale::thread_pool: could not start thread " +
                               std::to_string(workers_.size() + 1) + " of " +
                               std::to_string(size_) + ": " + error.what());
    }
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;
  ~thread_pool() { stop(); }

  /// Threads that run a job's ranges, the caller included.
  unsigned size() const noexcept { return size_; }

  /// `threads` (0: all hardware threads), checked against max_threads. Throws
  /// std::invalid_argument naming `what`.
  static unsigned resolve(unsigned threads, const char* what = "thread_pool: threads") {
    if (threads > max_threads)
      throw std::invalid_argument(std::string(what) + " (" + std::to_string(threads) +
                                  ") is above the limit of " + std::to_string(max_threads));
    if (threads == 0) {
      const unsigned hardware = std::thread::hardware_concurrency();
      return std::max(1u, std::min(hardware, max_threads));
    }
    return threads;
  }

  /// Range `worker` of `workers` equal contiguous ranges over [0, items).
  static std::size_t range_begin(std::size_t items, unsigned worker, unsigned workers) noexcept {
    // items · worker / workers without overflow: items = q · workers + r.
    const std::size_t q = items / workers, r = items % workers;
    return q * worker + r * worker / workers;
  }

  /// Runs body(worker, begin, end) on size() ranges of [0, items) (see the class comment).
  template <class Body>
  void run(std::size_t items, const Body& body) {
    if (size_ == 1) {
      body(0u, std::size_t{0}, items);
      return;
    }
    std::lock_guard<std::mutex> turn(run_mutex_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      job_ = {&call<Body>, &body, items};
      pending_ = size_ - 1;
      error_ = nullptr;
      ++generation_;
    }
    start_.notify_all();
    std::exception_ptr mine;
    try {
      body(0u, std::size_t{0}, range_begin(items, 1, size_));
    } catch (...) {
      mine = std::current_exception();
    }
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    if (!mine)
      mine = error_;
    error_ = nullptr;
    lock.unlock();
    if (mine)
      std::rethrow_exception(mine);
  }

private:
  struct job {
    void (*call)(const void* body, unsigned worker, std::size_t begin, std::size_t end) = nullptr;
    const void* body = nullptr;
    std::size_t items = 0;
  };

  template <class Body>
  static void call(const void* body, unsigned worker, std::size_t begin, std::size_t end) {
    (*static_cast<const Body*>(body))(worker, begin, end);
  }

  void work(unsigned worker) {
    std::uint64_t seen = 0;
    for (;;) {
      job current;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        start_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_)
          return;
        seen = generation_;
        current = job_;
      }
      std::exception_ptr failure;
      try {
        current.call(current.body, worker, range_begin(current.items, worker, size_),
                     range_begin(current.items, worker + 1, size_));
      } catch (...) {
        failure = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure && !error_)
        error_ = failure;
      if (--pending_ == 0)
        done_.notify_one();
    }
  }

  void stop() noexcept {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    start_.notify_all();
    for (auto& worker : workers_)
      worker.join();
    workers_.clear();
  }

  unsigned size_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_; // one job at a time
  std::mutex mutex_;     // guards everything below
  std::condition_variable start_, done_;
  job job_{};
  std::uint64_t generation_ = 0;
  unsigned pending_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

namespace detail {

/// Runs body(worker, begin, end) over [0, items) on `pool` when there is one, else on the calling
/// thread alone (`threads` == 1) or on a pool made for this call (a convenience that starts
/// threads: steady-state callers pass their own pool).
template <class Body>
void run_parallel(thread_pool* pool, unsigned threads, std::size_t items, const Body& body) {
  if (pool != nullptr) {
    pool->run(items, body);
    return;
  }
  const unsigned count = thread_pool::resolve(threads, "threads");
  if (count == 1 || items <= 1) {
    body(0u, std::size_t{0}, items);
    return;
  }
  thread_pool temporary(static_cast<unsigned>(std::min<std::size_t>(count, items)));
  temporary.run(items, body);
}

} // namespace detail
} // namespace v0
} // namespace blockscale
