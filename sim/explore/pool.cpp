#include "sim/explore/pool.h"

#include <unistd.h>

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

Progress::Progress(std::size_t total, const char* what)
    : total_(total), what_(what), enabled_(::isatty(STDERR_FILENO) == 1), start_s_(now_s()) {}

void Progress::update(std::size_t done) {
  if (!enabled_) return;
  const double elapsed = now_s() - start_s_;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0.0;
  char eta[32] = "--";
  if (rate > 0 && done < total_) {
    std::snprintf(eta, sizeof eta, "%.0f s", static_cast<double>(total_ - done) / rate);
  } else if (done >= total_) {
    std::snprintf(eta, sizeof eta, "0 s");
  }
  const int width = 30;
  const int filled = total_ ? static_cast<int>(width * done / total_) : width;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r  %s [%s] %zu/%zu  %.1f/s  ETA %s   ", what_, bar.c_str(), done, total_,
               rate, eta);
  std::fflush(stderr);
  shown_ = true;
}

void Progress::finish() {
  if (enabled_ && shown_) {
    std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
  shown_ = false;
}

void write_file_atomic(const std::string& path, const std::string& text, const std::string& flag) {
  if (path == "-") {
    std::cout << text << std::flush;
    return;
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    out << text;
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      throw InputError(flag, "cannot write '" + path + "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw InputError(flag, "cannot write '" + path + "'");
  }
}

}  // namespace zerosim::explore
