#include "sim/report/nccl_tests_table.h"

#include <cctype>
#include <cstdio>
#include <tuple>

#include "sim/core/error.h"

namespace zerosim::report {

namespace {

template <class... Args>
std::string format(const char* fmt, Args... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// nccl-tests v2.19.6 util.cu getFloatStr: the most decimals (2, 1, 0) that fit `width`, then
// scientific notation.
std::string fitted(double value, int width) {
  char buf[64];
  for (const char* fmt : {"%*.2f", "%*.1f", "%*.0f"}) {
    if (std::snprintf(buf, sizeof buf, fmt, width, value) <= width) return buf;
  }
  std::snprintf(buf, sizeof buf, width >= 7 ? "%*.1e" : "%*.0e", width, value);
  return buf;
}

// Classic common.cu BenchTime: the decimals drop at 100 us and 10 ms whatever the width.
std::string classic_time(double us) {
  return format(us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

std::string cell(const NcclTestsCell& c, NcclTestsLayout layout) {
  if (layout == NcclTestsLayout::Classic) {
    return format("  %7s  %6.2f  %6.2f  %5s", classic_time(c.time_us).c_str(), c.algbw_GBps,
                  c.busbw_GBps, "N/A");
  }
  return format("  %7s  %6s  %6s    N/A", fitted(c.time_us, 7).c_str(),
                fitted(c.algbw_GBps, 6).c_str(), fitted(c.busbw_GBps, 6).c_str());
}

}  // namespace

NcclTestsLayout nccl_tests_layout(const std::string& version, const std::string& key_path) {
  std::size_t i = 0;
  if (i < version.size() && (version[i] == 'v' || version[i] == 'V')) ++i;
  int parts[3] = {0, 0, 0};
  int n = 0;
  while (n < 3) {
    const std::size_t start = i;
    while (i < version.size() && std::isdigit(static_cast<unsigned char>(version[i]))) ++i;
    if (i == start || i - start > 4) break;
    parts[n++] = std::stoi(version.substr(start, i - start));
    if (i == version.size() || version[i] != '.') break;
    ++i;
  }
  if (n < 2 || i != version.size() || parts[0] != 2) {
    throw InputError(key_path, "nccl-tests version '" + version +
                                   "' is not of the form 2.MINOR[.PATCH] (e.g. 2.16 or 2.19.6)");
  }
  return std::tie(parts[1], parts[2]) >= std::make_tuple(17, 3) ? NcclTestsLayout::V2_17_3
                                                                 : NcclTestsLayout::Classic;
}

std::string nccl_tests_header(NcclTestsLayout layout) {
  std::string out = format(
      "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          \n",
      "", "", "", "", "");
  if (layout == NcclTestsLayout::Classic) {
    out += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s\n", "size",
                  "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
                  "algbw", "busbw", "#wrong");
    out += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s\n", "(B)",
                  "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                  "(GB/s)", "");
  } else {
    // The trailing " %*s" is the timestamp column of -S, empty here.
    out += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n",
                  "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                  "time", "algbw", "busbw", "#wrong", 0, "");
    out += format("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s\n",
                  "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
                  "(GB/s)", "", 0, "");
  }
  return out;
}

std::string nccl_tests_row(const NcclTestsRow& row, NcclTestsLayout layout) {
  const std::string root = format("%6i", row.root);
  return format("%12li  %12li  %8s  %6s  %6s", static_cast<long>(row.bytes),
                static_cast<long>(row.count), row.type.c_str(), row.redop.c_str(), root.c_str()) +
         cell(row.out_of_place, layout) + cell(row.in_place, layout);
}

std::string nccl_tests_footer(double avg_busbw_GBps, const std::string& binary) {
  // The "OK"/"FAILED" after the average only appears when NCCL_TESTS_MIN_BW is set.
  return format("# %-20s : %d %s\n", "Out of bounds values", 0, "OK") +
         format("# %-20s : %g %s\n", "Avg bus bandwidth", avg_busbw_GBps, "") + "#\n" +
         "# Collective test concluded: " + binary + "\n";
}

}  // namespace zerosim::report
