#pragma once
// Helpers of the sweep and the search: a progress line and atomic output files. Their thread pool
// is zerosim::parallel_for (sim/core/parallel_for.h).
#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>

#include "sim/core/parallel_for.h"

namespace zerosim::explore {

// When progress is shown. It goes to stderr only, so what a command writes on stdout or to its
// files is the same whichever mode is chosen.
enum class ProgressMode {
  Off,
  Terminal,  // only when stderr is a terminal (the commands' default: CI logs stay clean)
  Always,    // --progress: on a terminal too, else one line every few seconds
};

// A progress line: done/total, points per second, ETA, and a note (the best so far). On a
// terminal the line is rewritten in place ("\r"); elsewhere, under ProgressMode::Always, a new
// line is written at most every kLineInterval seconds so that a log gets a few lines, not
// thousands. total = 0 means not known in advance (no ETA). finish() ends the line.
class Progress {
 public:
  static constexpr double kLineInterval = 5.0;

  Progress(std::size_t total, std::string what, ProgressMode mode, std::FILE* out = stderr);
  void update(std::size_t done, const std::string& note = "");
  void finish();
  bool enabled() const { return enabled_; }
  // parallel_for's on_progress: update(offset + done, note()); empty when the line is not
  // shown, so that the pool joins its threads at once instead of polling.
  std::function<void(std::size_t)> callback(std::function<std::string()> note = {},
                                            std::size_t offset = 0);

 private:
  std::size_t total_;
  std::string what_;
  std::FILE* out_;
  bool enabled_, terminal_;
  std::size_t last_done_ = 0;
  std::string last_note_;
  double start_s_, last_line_s_;

  void write(std::size_t done, const std::string& note, bool final_line);
};


}  // namespace zerosim::explore
