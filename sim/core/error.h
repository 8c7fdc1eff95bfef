#pragma once
// Bad input is reported as an InputError that names the key path (e.g. "parallel.tp") and what
// is allowed. The CLI turns it into one line on stderr and exit status 2; nothing below the CLI
// prints, exits or aborts on bad input.
#include <stdexcept>
#include <string>
#include <vector>

namespace zerosim {

class InputError : public std::runtime_error {
 public:
  InputError(std::string key_path, const std::string& message);
  const std::string& key_path() const { return key_path_; }

 private:
  std::string key_path_;
};

// An input that was read, but not as written: ignored, defaulted, approximated or translated (a
// legacy key, an "auto" value filled in, a framework key accepted but not simulated). Never
// silent: the report lists every one (summary and JSON `warnings`) with the key path as the user
// wrote it, e.g. "deepspeed(ds.json).zero_optimization.cpu_offload".
struct InputWarning {
  std::string key_path;
  std::string message;
  bool operator==(const InputWarning&) const = default;
};

// " (did you mean 'x'?)" for the closest candidate within a small edit distance, else "".
std::string did_you_mean(const std::string& bad, const std::vector<std::string>& candidates);

// "a, b, c" for error messages listing what is allowed.
std::string join_list(const std::vector<std::string>& items);

// Joins a parent key path and a child key: ("model", "hidden_size") -> "model.hidden_size".
std::string key_join(const std::string& parent, const std::string& child);

}  // namespace zerosim
