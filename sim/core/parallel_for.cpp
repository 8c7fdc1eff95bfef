#include "sim/core/parallel_for.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace zerosim {

int default_jobs() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn,
                  const std::function<void(std::size_t)>& on_progress) {
  if (n == 0) {
    if (on_progress) on_progress(0);
    return;
  }
  std::atomic<std::size_t> next{0}, done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (;;) {
      if (failed.load()) return;
      const std::size_t i = next.fetch_add(1);
      if (i >= n) return;
      try {
        fn(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
      done.fetch_add(1);
    }
  };
  const std::size_t threads = std::min<std::size_t>(n, static_cast<std::size_t>(std::max(1, jobs)));
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (std::size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  if (on_progress) {
    while (done.load() < n && !failed.load()) {
      on_progress(done.load());
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  if (on_progress) on_progress(done.load());
}

}  // namespace zerosim
