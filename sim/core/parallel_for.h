#pragma once
// A small fixed thread pool for independent work items: parallel_for(n, jobs, fn) calls fn(i)
// once for every i in [0, n) on `jobs` threads, handing out indices in increasing order. Each
// item writes its own result slot, so results do not depend on the number of threads. While the
// workers run, the calling thread calls `on_progress(done)` about every 50 ms (and once at the
// end) when given. The first exception an item throws is rethrown after every thread joined
// (items not yet started are skipped).
#include <cstddef>
#include <functional>

namespace zerosim {

// std::thread::hardware_concurrency(), at least 1.
int default_jobs();

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn,
                  const std::function<void(std::size_t done)>& on_progress = {});

}  // namespace zerosim
