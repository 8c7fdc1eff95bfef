#pragma once
// `zerosim-validate compare`: predicted vs measured from a "zerosim-replay/1" file (replay.h).
//
// error % = (predicted - measured) / measured * 100: the simulator's error against the hardware,
// positive when it predicts too slow. Rows:
//   step    per rank and overall (max over ranks);
//   class   ops summed by what they are (compute:<work>, collective:<kind>, copy:<stream>), so a
//           systematic bias in one cost model stands out;
//   op      every timed op (alloc/free and ops with neither a prediction nor a measurement are
//           left out), worst first: by |predicted - measured| in seconds (default), or by
//           |error %| (SortBy::Percent).
#include <iosfwd>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim::validate {

class CompareError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct CompareRow {
  std::string label;  // op: "r<rank> #<id> <name>"; class: the class key; step: "rank <r>" / "step"
  int rank = -1, id = -1;
  std::string kind;
  double predicted_s = 0, measured_s = 0;
  int count = 1;
  std::optional<double> error_pct;  // empty when measured is 0
  double abs_error_s() const;
};

struct CompareReport {
  std::string backend, device;
  CompareRow step;
  std::vector<CompareRow> rank_steps, classes, ops;
};

enum class SortBy { AbsoluteSeconds, Percent };

CompareReport compare_replay(const nlohmann::json& replay, SortBy sort = SortBy::AbsoluteSeconds);
void print_compare(std::ostream& out, const CompareReport& r, int top_ops);
nlohmann::json compare_json(const CompareReport& r, int top_ops);

std::optional<double> error_pct(double predicted, double measured);

}  // namespace zerosim::validate
