#pragma once
// Helpers of the sweep and the search: a progress bar and atomic output files. Their thread pool
// is zerosim::parallel_for (sim/core/parallel_for.h).
#include <cstddef>
#include <string>

#include "sim/core/parallel_for.h"

namespace zerosim::explore {

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
