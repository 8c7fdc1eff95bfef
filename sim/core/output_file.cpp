#include "sim/core/output_file.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

#include "sim/core/error.h"

namespace zerosim {
namespace fs = std::filesystem;

OutputFile::OutputFile(std::string path, std::string flag)
    : path_(std::move(path)), flag_(std::move(flag)) {
  std::error_code ec;
  const fs::file_status st = fs::status(path_, ec);
  in_place_ = path_ == "-" || (fs::exists(st) && !fs::is_regular_file(st));
}

OutputFile::~OutputFile() {
  if (!tmp_.empty()) {
    std::error_code ec;
    fs::remove(tmp_, ec);
  }
}

void OutputFile::fail() const {
  throw InputError(flag_, path_ == "-" ? std::string("cannot write to standard output")
                                       : "cannot write '" + path_ + "'");
}

void OutputFile::write(const std::string& text) {
  if (path_.empty()) return;
  if (in_place_) {
    text_ = text;
    return;
  }
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  std::ofstream out(tmp_, std::ios::binary);
  out << text;
  out.close();
  if (!out) fail();
}

void OutputFile::commit() {
  if (path_.empty()) return;
  if (path_ == "-") {
    std::cout << text_;
    if (!flush_standard_output()) fail();
    return;
  }
  if (in_place_) {
    std::ofstream out(path_, std::ios::binary);
    out << text_;
    out.close();
    if (!out) fail();
    return;
  }
  if (tmp_.empty()) return;
  std::error_code ec;
  fs::rename(tmp_, path_, ec);
  if (ec) fail();
  tmp_.clear();
}

void write_output_file(const std::string& path, const std::string& text, const std::string& flag) {
  OutputFile f(path, flag);
  f.write(text);
  f.commit();
}

bool flush_standard_output() {
  std::cout.flush();
  return static_cast<bool>(std::cout);
}

}  // namespace zerosim
