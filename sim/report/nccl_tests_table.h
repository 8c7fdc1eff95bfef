#pragma once
// nccl-tests' result table, character for character, so that a predicted sweep can be diffed
// against a measured log and read by the scripts that parse those logs. Two layouts exist
// (github.com/NVIDIA/nccl-tests):
//   Classic  up to v2.17.2 (src/common.cu): "#wrong" right after busbw with one space, bandwidths
//            "%6.2f", time "%7.2f" below 100 us, "%7.1f" below 10 ms, "%7.0f" above;
//   V2_17_3  v2.17.3 and later (src/util.cu): "#wrong" two spaces further, and every number
//            keeps two decimals while it fits its width (7 for time, 6 for bandwidths), then
//            one, then none (getFloatStr, v2.19.6; up to v2.19.5 a digit count gave the same
//            choice); the header lines end in one space (the empty timestamp column).
// In both, a row is size, count, type, redop, root, then out-of-place and in-place time,
// algbw, busbw and #wrong ("N/A" when nothing was checked), and the footer averages busbw over
// every out-of-place and in-place cell.
#include <cstdint>
#include <string>

namespace zerosim::report {

enum class NcclTestsLayout : std::uint8_t { Classic, V2_17_3 };

// "2.16", "2.17.3", "v2.19.6" -> the layout that release prints. InputError(key_path) for
// anything that is not 2.MINOR[.PATCH].
NcclTestsLayout nccl_tests_layout(const std::string& version, const std::string& key_path);

struct NcclTestsCell {
  double time_us = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

struct NcclTestsRow {
  std::int64_t bytes = 0;
  std::int64_t count = 0;
  std::string type;   // "float"
  std::string redop;  // "sum", "none"
  int root = -1;
  NcclTestsCell out_of_place, in_place;
};

// The three column-header lines (the "out-of-place / in-place" line, names, units), each with
// its newline.
std::string nccl_tests_header(NcclTestsLayout layout);
// One row, without its newline (callers may append columns of their own).
std::string nccl_tests_row(const NcclTestsRow& row, NcclTestsLayout layout);
// "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : <avg>", "#" and
// "# Collective test concluded: <binary>", each with its newline.
std::string nccl_tests_footer(double avg_busbw_GBps, const std::string& binary);

}  // namespace zerosim::report
