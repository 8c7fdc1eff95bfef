#pragma once
// Output files, written whole or not at all. A path that is a regular file, or nothing yet, is
// written to a temporary file beside it and renamed into place on commit, so that a failure
// leaves no partial file; a path that exists as something else (a device such as /dev/stdout, a
// FIFO) is written in place on commit, never replaced; "-" is standard output. Every failure, a
// full device included, is an InputError naming the flag that gave the path.
#include <string>

namespace zerosim {

class OutputFile {
 public:
  // An empty path: nothing is written.
  OutputFile(std::string path, std::string flag);
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();  // removes a temporary file never committed

  // Prepares `text`: a regular file's temporary is written now.
  void write(const std::string& text);
  // Puts it in place: renames the temporary, or writes the device or standard output.
  void commit();

 private:
  [[noreturn]] void fail() const;
  std::string path_, flag_, tmp_, text_;
  bool in_place_ = false;
};

// write() then commit().
void write_output_file(const std::string& path, const std::string& text, const std::string& flag);

// Flushes standard output; false if anything written to it was lost (a closed pipe, a full
// device).
bool flush_standard_output();

}  // namespace zerosim
