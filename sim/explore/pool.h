#pragma once
// A small fixed thread pool for independent work items: parallel_for(n, jobs, fn) calls fn(i)
// once for every i in [0, n) on `jobs` threads, handing out indices in increasing order. Each
// item writes its own result slot, so results do not depend on the number of threads. While the
// workers run, the calling thread calls `on_progress(done)` about every 50 ms (and once at the
// end) when given. The first exception an item throws is rethrown after every thread joined
// (items not yet started are skipped).
#include <cstddef>
#include <functional>
#include <string>

namespace zerosim::explore {

// std::thread::hardware_concurrency(), at least 1.
int default_jobs();

void parallel_for(std::size_t n, int jobs, const std::function<void(std::size_t)>& fn,
                  const std::function<void(std::size_t done)>& on_progress = {});

// A one-line progress bar on stderr ("\r" updates), shown only when stderr is a terminal:
// done/total, points per second, ETA. finish() ends the line.
class Progress {
 public:
  Progress(std::size_t total, const char* what);
  void update(std::size_t done);
  void finish();
  bool enabled() const { return enabled_; }

 private:
  std::size_t total_;
  const char* what_;
  bool enabled_;
  bool shown_ = false;
  double start_s_;
};

// Writes `text` to `path` ("-" = stdout) through a temporary file renamed into place, so a
// failure never leaves a partial output file; InputError naming `flag` when it cannot.
void write_file_atomic(const std::string& path, const std::string& text, const std::string& flag);

}  // namespace zerosim::explore
