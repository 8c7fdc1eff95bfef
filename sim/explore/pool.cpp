#include "sim/explore/pool.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "sim/core/error.h"

namespace zerosim::explore {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

Progress::Progress(std::size_t total, std::string what, ProgressMode mode, std::FILE* out)
    : total_(total),
      what_(std::move(what)),
      out_(out),
      enabled_(false),
      terminal_(::isatty(::fileno(out)) == 1),
      start_s_(now_s()) {
  enabled_ = mode == ProgressMode::Always || (mode == ProgressMode::Terminal && terminal_);
  last_line_s_ = start_s_;  // in a log, the first line after kLineInterval (or at the end)
}

void Progress::update(std::size_t done, const std::string& note) {
  if (!enabled_) return;
  last_done_ = done;
  last_note_ = note;
  if (!terminal_ && now_s() - last_line_s_ < kLineInterval) return;
  write(done, note, false);
}

void Progress::write(std::size_t done, const std::string& note, bool final_line) {
  const double elapsed = now_s() - start_s_;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  std::string line = "  " + what_ + " ";
  char buf[96];
  if (total_ > 0) {
    const int width = 30;
    const int filled = static_cast<int>(width * std::min(done, total_) / total_);
    std::string bar(static_cast<std::size_t>(filled), '#');
    bar.resize(width, '.');
    char eta[32] = "--";
    if (done >= total_) {
      std::snprintf(eta, sizeof eta, "0 s");
    } else if (rate > 0) {
      std::snprintf(eta, sizeof eta, "%.0f s", static_cast<double>(total_ - done) / rate);
    }
    std::snprintf(buf, sizeof buf, "[%s] %zu/%zu  %.1f/s  ETA %s", bar.c_str(), done, total_,
                  rate, eta);
  } else {
    std::snprintf(buf, sizeof buf, "%zu done  %.1f/s  %.0f s", done, rate, elapsed);
  }
  line += buf;
  if (!note.empty()) line += "  " + note;
  if (terminal_) {
    // Pad over what a longer previous line left on the terminal.
    std::fprintf(out_, "\r%s   ", line.c_str());
    if (final_line) std::fprintf(out_, "\n");
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_line_s_ = now_s();
}

std::function<void(std::size_t)> Progress::callback(std::function<std::string()> note,
                                                   std::size_t offset) {
  if (!enabled_) return {};
  return [this, note = std::move(note), offset](std::size_t done) {
    update(offset + done, note ? note() : std::string());
  };
}

void Progress::finish() {
  if (!enabled_) return;
  // The last state is always written: a log run under --progress ends with the full count.
  write(last_done_, last_note_, true);
}

}  // namespace zerosim::explore
