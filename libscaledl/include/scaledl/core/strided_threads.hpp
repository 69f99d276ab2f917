#pragma once
// Needs LibTorch: no (this header includes no LibTorch header).
// Independent work items on the hardware threads: thread t runs items t, t + T, t + 2T, ...
// (plain std::thread; no BLAS or OpenMP pool is touched, so a process's thread settings for
// those libraries hold). Used where items are few and uneven: the graphs of a prediction's
// bounds, a bundle's layer-model files, a chunk of configurations' layer parts.
#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace scaledl {

/// Threads to use for `items` items: the hardware threads, at most `max_threads` and `items`.
inline size_t strided_thread_count(size_t items, size_t max_threads = 8) {
  const size_t hw = std::max(1u, std::thread::hardware_concurrency());
  return std::max<size_t>(1, std::min({hw, max_threads, items}));
}

/// Runs fn(i) for every i in [0, items) on `threads` threads (on this thread when 1), then
/// rethrows the exception of the lowest-numbered thread that threw, if any (each thread stops
/// at its first). Items that must not stop the others catch their own errors.
template <class Fn>
void for_each_strided(size_t items, size_t threads, Fn&& fn) {
  if (threads <= 1) {
    for (size_t i = 0; i < items; ++i) fn(i);
    return;
  }
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      try {
        for (size_t i = t; i < items; i += threads) fn(i);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace scaledl
