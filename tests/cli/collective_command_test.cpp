// `zerosim collective`: nccl-tests' flags and table, the JSON, and one InputError per bad flag.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/cli/collective_command.h"
#include "sim/core/error.h"

namespace zerosim::cli {
namespace {

using nlohmann::json;

std::string run_captured(const std::vector<std::string>& args, int* rc,
                         std::string* err = nullptr) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  *rc = run_collective_command(args);
  const std::string e = testing::internal::GetCapturedStderr();
  if (err) *err = e;
  return testing::internal::GetCapturedStdout();
}

json run_json(std::vector<std::string> args) {
  int rc = -1;
  args.insert(args.end(), {"--json", "-"});
  const std::string out = run_captured(args, &rc);
  EXPECT_EQ(rc, 0);
  return json::parse(out);
}

std::string error_key(const std::vector<std::string>& args) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  std::string key;
  try {
    run_collective_command(args);
  } catch (const InputError& e) {
    key = e.key_path();
  }
  testing::internal::GetCapturedStderr();
  testing::internal::GetCapturedStdout();
  if (key.empty()) ADD_FAILURE() << "no InputError";
  return key;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

std::vector<std::string> rows_of(const std::string& text) {
  std::vector<std::string> rows;
  for (const std::string& l : lines_of(text)) {
    if (!l.empty() && l[0] != '#') rows.push_back(l);
  }
  return rows;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

// Where each whitespace-separated field of a line ends: nccl-tests right-aligns every column, so
// two rows of the same layout end their fields at the same offsets whatever the numbers.
std::vector<std::size_t> field_ends(const std::string& line) {
  std::vector<std::size_t> ends;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] != ' ' && (i + 1 == line.size() || line[i + 1] == ' ')) ends.push_back(i + 1);
  }
  return ends;
}

std::string first_field(const std::string& line) {
  std::istringstream in(line);
  std::string f;
  in >> f;
  return f;
}

// The parts of a real log the layout must reproduce: its column-header lines (compared without
// trailing blanks, which the pasted logs lost), data rows (compared by field count and where
// each field ends, matched by size) and footer lines (compared up to the number).
// The logs were run with checking on (#wrong "0"); zerosim prints what nccl-tests prints with
// -c 0, "N/A". From 2.17.3 that is "    N/A" where a count is "  %6g", one character shorter,
// so there the fields from the first #wrong on end one character earlier, and two from the
// second #wrong on.
struct RealLog {
  std::vector<std::string> header, rows, footer;
  bool na_shorter = false;
};

std::vector<std::size_t> unchecked_ends(std::vector<std::size_t> ends, bool na_shorter) {
  for (std::size_t i = 8; na_shorter && i < ends.size(); ++i) ends[i] -= i >= 12 ? 2 : 1;
  return ends;
}

void expect_layout_of(const RealLog& real, const std::string& out) {
  const std::vector<std::string> lines = lines_of(out);
  for (const std::string& h : real.header) {
    bool found = false;
    for (const std::string& l : lines) found = found || rstrip(l) == h;
    EXPECT_TRUE(found) << "no header line\n" << h << "\nin\n" << out;
  }
  const std::vector<std::string> ours = rows_of(out);
  for (const std::string& r : real.rows) {
    bool matched = false;
    for (const std::string& o : ours) {
      if (first_field(o) != first_field(r)) continue;
      matched = true;
      EXPECT_EQ(field_ends(o), unchecked_ends(field_ends(r), real.na_shorter))
          << "ours: " << o << "\nreal: " << r;
    }
    EXPECT_TRUE(matched) << "no row of size " << first_field(r) << " in\n" << out;
  }
  for (const std::string& f : real.footer) {
    // The average is a number of ours; every other footer line is fixed text.
    const bool average = f.rfind("# Avg bus bandwidth", 0) == 0;
    const std::string label = average ? f.substr(0, f.find(':') + 2) : rstrip(f);
    bool found = false;
    for (const std::string& l : lines) {
      if (average ? l.rfind(label, 0) == 0 : rstrip(l) == label) {
        found = true;
        if (average) {
          EXPECT_GT(std::atof(l.c_str() + label.size()), 0) << l;
        }
      }
    }
    EXPECT_TRUE(found) << "no footer line '" << label << "' in\n" << out;
  }
}

// nccl-tests up to 2.17.2, all_reduce_perf on two nodes, from a comment of 2024-09-24 on
// https://github.com/NVIDIA/nccl-tests/issues/252 (first line: nccl-tests 2.13.6, in the log of
// https://github.com/NixOS/nixpkgs/pull/251856). The numbers are theirs, not ours.
TEST(collectiveCommand, ClassicLayoutMatchesARealLog) {
  const RealLog real{
      {"#                                                              out-of-place                 "
       "      in-place",
       "#       size         count      type   redop    root     time   algbw   busbw #wrong     time"
       "   algbw   busbw #wrong",
       "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)"
       "  (GB/s)  (GB/s)"},
      {"   536870912     134217728     float     sum      -1    10052   53.41   93.46      0   9676.9"
       "   55.48   97.09      0",
       "  1073741824     268435456     float     sum      -1    20079   53.48   93.58      0    19265"
       "   55.74   97.54      0"},
      {"# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 95.3009"}};
  int rc = -1;
  const std::string out =
      run_captured({"--nodes", "2", "-b", "512M", "-e", "1G", "-f", "2"}, &rc);
  EXPECT_EQ(rc, 0);
  expect_layout_of(real, out);
  // The time column keeps 7 characters: "%7.2f" below 100 us, "%7.1f" below 10 ms, then "%7.0f".
  const std::string big = run_captured({"--nodes", "2", "-b", "16G", "-e", "16G"}, &rc);
  const std::string row = rows_of(big).at(0);
  EXPECT_EQ(row.substr(52, 9).find('.'), std::string::npos) << row;  // "  %7.0f"
}

// nccl-tests 2.17.3 and later: the header lines of an nccl-tests 2.20.0 log in
// https://github.com/NVIDIA/dgx-spark-playbooks/pull/103 and a row and the footer of an
// nccl-tests 2.19.7 log in https://github.com/kvcache-ai/Mooncake/pull/3484.
TEST(collectiveCommand, NewLayoutMatchesARealLog) {
  const RealLog real{
      {"#                                                              out-of-place                 "
       "      in-place",
       "#       size         count      type   redop    root     time   algbw   busbw  #wrong     tim"
       "e   algbw   busbw  #wrong",
       "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us"
       ")  (GB/s)  (GB/s)"},
      {"        8192          2048     float     sum      -1    35.15    0.23    0.23       0    30.33"
       "    0.27    0.27       0",
       "   268435456      67108864     float     sum      -1  1366.17  196.49  343.85       0  1367.43"
       "  196.31  343.54       0"},
      {"# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 102.829 ", "#",
       "# Collective test concluded: all_reduce_perf"},
      true};
  int rc = -1;
  const std::string out = run_captured(
      {"--nodes", "2", "-b", "8K", "-e", "256M", "-f", "2", "--nccl-tests-version", "2.20.0"}, &rc);
  EXPECT_EQ(rc, 0);
  expect_layout_of(real, out);
}

// 8 B to 1 MiB by 4: 8, 32, ..., 524288 = 9 sizes.
TEST(collectiveCommand, PrintsOneRowPerSize) {
  int rc = -1;
  std::string out =
      run_captured({"--cluster", "dgx-h100", "--nodes", "2", "-b", "8", "-e", "1M", "-f", "4"}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(rows_of(out).size(), 9u);
  EXPECT_NE(out.find("16 ranks"), std::string::npos);
  // nccl-tests' defaults: one size, 32 MiB.
  out = run_captured({}, &rc);
  ASSERT_EQ(rows_of(out).size(), 1u);
  EXPECT_EQ(first_field(rows_of(out)[0]), "33554432");
  // Linear steps with -i when -f is not > 1.
  const json j = run_json({"-b", "1M", "-e", "4M", "-i", "1M"});
  ASSERT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][2]["bytes"], 3 << 20);
}

// The preamble names what produced the numbers; the footer averages busbw over the rows.
TEST(collectiveCommand, PreambleAndFooterFollowTheModel) {
  int rc = -1;
  std::string out = run_captured({"--nodes", "2", "-b", "1M", "-e", "64M", "-f", "4"}, &rc);
  EXPECT_NE(out.find("NCCL 2.18 tuner (tables of v2.18.5-1)"), std::string::npos) << out;
  EXPECT_NE(out.find("25 us launch overhead"), std::string::npos);
  EXPECT_NE(out.find("closed form"), std::string::npos);
  EXPECT_NE(out.find("# nThread 1 nGpus 8 minBytes 1048576 maxBytes 67108864 step: 4(factor)"),
            std::string::npos);
  const json j = run_json({"--nodes", "2", "-b", "1M", "-e", "64M", "-f", "4"});
  double sum = 0;
  for (const auto& r : j["rows"]) sum += r["busbw_GBps"].get<double>();
  const double avg = sum / static_cast<double>(j["rows"].size());
  EXPECT_NEAR(j["avg_busbw_GBps"].get<double>(), avg, 1e-9);
  const auto at = out.find("# Avg bus bandwidth    : ");
  ASSERT_NE(at, std::string::npos);
  EXPECT_NEAR(std::atof(out.c_str() + at + 25), avg, 1e-4 * avg);

  out = run_captured({"--nodes", "4", "--oversubscription", "2", "--nccl-version", "2.27",
                      "--no-launch-overhead", "-b", "1M", "-e", "1M"},
                     &rc);
  EXPECT_NE(out.find("NCCL 2.27 tuner (tables of v2.27.7-1)"), std::string::npos) << out;
  EXPECT_NE(out.find("no launch overhead (--no-launch-overhead)"), std::string::npos);
  EXPECT_NE(out.find("routed on the dgx-h100 topology (oversubscription 2)"), std::string::npos);
}

// JSON rows carry nccl-tests' definitions: algbw = size / time, busbw = algbw x 2(n-1)/n.
TEST(collectiveCommand, JsonRowsFollowNcclTests) {
  const json j = run_json({"--cluster", "dgx-a100-80gb", "--collective", "all_reduce", "-b", "1K",
                           "-e", "1G", "-f", "32"});
  ASSERT_EQ(j["rows"].size(), 5u);
  for (const auto& r : j["rows"]) {
    const double bytes = r["bytes"].get<double>();
    const double t = r["time_us"].get<double>();
    EXPECT_NEAR(r["algbw_GBps"].get<double>(), bytes / (t * 1e3), 1e-9 * bytes / t);
    EXPECT_NEAR(r["busbw_GBps"].get<double>(), r["algbw_GBps"].get<double>() * 1.75, 1e-9);
    EXPECT_TRUE(r.contains("algorithm"));
    EXPECT_TRUE(r.contains("protocol"));
    EXPECT_EQ(r["count"], r["bytes"].get<std::int64_t>() / 4);
    EXPECT_EQ(r["type"], "float");
    EXPECT_EQ(r["redop"], "sum");
    EXPECT_EQ(r["root"], -1);
  }
  EXPECT_EQ(j["rows"].back()["algorithm"], "ring");
  EXPECT_EQ(j["nccl_version"], "2.18");
  // plots/collective.py reads "op" as the collective.
  EXPECT_EQ(j["op"], "all_reduce");
  EXPECT_EQ(j["collective"], "all_reduce");
  EXPECT_EQ(j["nccl_tests_binary"], "all_reduce_perf");
}

TEST(collectiveCommand, RanksAlgoAndFabric) {
  json j = run_json({"--cluster", "dgx-h100", "--nodes", "4", "--ranks", "0-31:8", "--algo",
                     "ring", "--proto", "Simple", "-b", "1G", "-e", "1G", "--oversubscription",
                     "2"});
  EXPECT_EQ(j["ranks"], json({0, 8, 16, 24}));
  EXPECT_EQ(j["rows"][0]["algorithm"], "ring");
  EXPECT_EQ(j["rows"][0]["protocol"], "Simple");
  EXPECT_TRUE(j["fabric"].get<bool>());
  j = run_json({"--ranks", "0,8", "--nodes", "2", "--collective", "send_recv", "-b", "1M", "-e",
                "1M"});
  EXPECT_EQ(j["rows"][0]["algorithm"], "p2p");
  EXPECT_EQ(j["nccl_tests_binary"], "sendrecv_perf");
}

// nccl-tests: ranks = MPI processes x threads x GPUs per thread; without any, every GPU.
TEST(collectiveCommand, LaunchFlagsDecideTheRanks) {
  EXPECT_EQ(run_json({"--nodes", "2", "--nprocs", "2", "-g", "8"})["ranks"].size(), 16u);
  EXPECT_EQ(run_json({"--nodes", "2", "--nprocs", "16", "-g", "1"})["ranks"].size(), 16u);
  EXPECT_EQ(run_json({"--nodes", "2", "-t", "2", "-g", "2"})["ranks"].size(), 4u);
  EXPECT_EQ(run_json({"--nodes", "2", "-g", "4"})["ranks"].size(), 4u);
  EXPECT_EQ(run_json({"--nodes", "2"})["ranks"].size(), 16u);
  int rc = -1;
  const std::string out = run_captured({"--nodes", "2", "-t", "2", "-g", "2"}, &rc);
  EXPECT_NE(out.find("# nThread 2 nGpus 2 "), std::string::npos);
  EXPECT_EQ(run_json({"--collective", "send_recv", "-g", "2"})["rows"][0]["algorithm"], "p2p");
}

// -d sets the element: count = size / element, the size rounded down; per-rank shares of
// all-gather, reduce-scatter and all-to-all to 16 bytes (nccl-tests' GetCollByteCount).
TEST(collectiveCommand, DatatypeSetsCountAndSize) {
  json j = run_json({"-d", "double", "-b", "20", "-e", "20"});
  EXPECT_EQ(j["rows"][0]["bytes"], 16);
  EXPECT_EQ(j["rows"][0]["count"], 2);
  EXPECT_EQ(j["rows"][0]["type"], "double");
  // 8 ranks, 1000 B of float: 250 elements, 31 per rank, 28 after the 16-byte trim.
  j = run_json({"--collective", "all_gather", "-b", "1000", "-e", "1000"});
  EXPECT_EQ(j["rows"][0]["count"], 28);
  EXPECT_EQ(j["rows"][0]["bytes"], 28 * 8 * 4);
  EXPECT_EQ(j["rows"][0]["redop"], "none");
  j = run_json({"--collective", "all_to_all", "-d", "int8", "-b", "1000", "-e", "1000"});
  EXPECT_EQ(j["rows"][0]["count"], 112);  // 125 per rank, down to a multiple of 16
  // -d all and -o all iterate as nccl-tests does: types outside, ops inside.
  j = run_json({"-d", "all", "-o", "all", "-b", "1M", "-e", "1M"});
  EXPECT_EQ(j["rows"].size(), 10u * 6u);  // NCCL 2.18: no fp8
  EXPECT_EQ(j["rows"][7]["type"], "uint8");
  EXPECT_EQ(j["rows"][7]["redop"], "prod");
  j = run_json({"-d", "all", "-b", "1M", "-e", "1M", "--nccl-version", "2.27"});
  EXPECT_EQ(j["rows"].size(), 12u);
  EXPECT_EQ(j["rows"][11]["type"], "f8e5m2");
}

// NCCL's cost is the same for every op and type, but NVLS runs only some (ncclNvlsSupported).
TEST(collectiveCommand, OpAndTypeDecideWhetherNvlsRuns) {
  auto algo = [](const std::string& op, const std::string& type) {
    return run_json({"--cluster", "dgx-h100", "-b", "1G", "-e", "1G", "-o", op, "-d",
                     type})["rows"][0]["algorithm"]
        .get<std::string>();
  };
  EXPECT_EQ(algo("sum", "float"), "nvls");
  EXPECT_EQ(algo("max", "bfloat16"), "nvls");
  EXPECT_NE(algo("max", "float"), "nvls");
  EXPECT_NE(algo("prod", "float"), "nvls");
  EXPECT_NE(algo("avg", "half"), "nvls");
  EXPECT_NE(algo("sum", "int8"), "nvls");
  // The cost of what runs does not depend on the op: prod, min on float and avg all take ring.
  const double prod = run_json({"-b", "1G", "-e", "1G", "-o", "prod"})["rows"][0]["time_us"];
  const double avg = run_json({"-b", "1G", "-e", "1G", "-o", "avg"})["rows"][0]["time_us"];
  EXPECT_DOUBLE_EQ(prod, avg);
  int rc = -1;
  const std::string out = run_captured({"-o", "prod"}, &rc);
  EXPECT_NE(out.find("NVLS off for this op and type"), std::string::npos) << out;
}

// -r: broadcast and reduce print their root; -1 runs every root in turn.
TEST(collectiveCommand, RootForBroadcastAndReduce) {
  json j = run_json({"--collective", "broadcast", "-g", "4", "-r", "-1", "-b", "1M", "-e", "2M",
                     "-f", "2"});
  ASSERT_EQ(j["rows"].size(), 8u);
  EXPECT_EQ(j["rows"][0]["root"], 0);
  EXPECT_EQ(j["rows"][7]["root"], 3);
  EXPECT_EQ(j["rows"][0]["redop"], "none");
  j = run_json({"--collective", "reduce", "-r", "2", "-o", "max"});
  EXPECT_EQ(j["rows"][0]["root"], 2);
  EXPECT_EQ(j["rows"][0]["redop"], "max");
  EXPECT_EQ(run_json({"-r", "3"})["rows"][0]["root"], -1);  // all-reduce has no root
}

// Flags that only change how a real run measures leave every number alone and are named in one
// warning; -G (CUDA graphs) drops the launch overhead as --no-launch-overhead does.
TEST(collectiveCommand, MeasurementFlagsWarnAndChangeNothing) {
  const std::vector<std::string> base = {"--nodes", "2", "-b", "8", "-e", "1G", "-f", "8"};
  int rc = -1;
  std::string err;
  const std::string plain = run_captured(base, &rc, &err);
  EXPECT_EQ(err, "");
  std::vector<std::string> with = base;
  with.insert(with.end(), {"-n", "50", "-w", "5", "-c", "0", "-z", "1", "-a", "3", "-R", "1",
                           "--per_iter_timing", "1", "-J", "out.json"});
  const std::string measured = run_captured(with, &rc, &err);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(rows_of(measured), rows_of(plain));
  EXPECT_EQ(lines_of(err).size(), 1u) << err;
  for (const char* flag : {"-n 50", "-w 5", "-c 0", "-z 1", "-a 3", "-R 1", "-I 1", "-J out.json"}) {
    EXPECT_NE(err.find(flag), std::string::npos) << flag << " not in " << err;
  }
  EXPECT_NE(err.find("no effect on the prediction"), std::string::npos);

  const json graph = run_json({"-b", "1M", "-e", "1M", "-G", "10"});
  const json nolaunch = run_json({"-b", "1M", "-e", "1M", "--no-launch-overhead"});
  const json launch = run_json({"-b", "1M", "-e", "1M"});
  EXPECT_DOUBLE_EQ(graph["rows"][0]["time_us"], nolaunch["rows"][0]["time_us"]);
  EXPECT_NEAR(launch["rows"][0]["time_us"].get<double>() - graph["rows"][0]["time_us"].get<double>(),
              25.0, 1e-9);
  EXPECT_FALSE(graph["launch_overhead"].get<bool>());
}

TEST(collectiveCommand, VerboseAppendsNcclsChoice) {
  int rc = -1;
  const std::string out = run_captured({"-b", "1G", "-e", "1G", "--verbose"}, &rc);
  const std::string row = rows_of(out).at(0);
  EXPECT_NE(row.find("    N/A  nvls       Simple        16"), std::string::npos) << row;
  // nccl-tests' columns come first, unchanged.
  const std::string plain = rows_of(run_captured({"-b", "1G", "-e", "1G"}, &rc)).at(0);
  EXPECT_EQ(row.substr(0, plain.size()), plain);
}

TEST(collectiveCommand, BadFlagsNameTheirKey) {
  EXPECT_EQ(error_key({"--bogus"}), "collective");
  EXPECT_EQ(error_key({"--gpus", "4"}), "collective");  // now -g/--ngpus, GPUs per thread
  EXPECT_EQ(error_key({"--collective", "allreduse"}), "collective.collective");
  EXPECT_EQ(error_key({"--op", "all_reduce"}), "collective.op");  // the collective moved
  EXPECT_EQ(error_key({"-o", "maximum"}), "collective.op");
  EXPECT_EQ(error_key({"-d", "fp16"}), "collective.datatype");
  EXPECT_EQ(error_key({"-d", "f8e4m3"}), "collective.datatype");  // 2.18 tables: no fp8
  EXPECT_EQ(error_key({"--ranks", "0-99"}), "collective.ranks");
  EXPECT_EQ(error_key({"--ranks", "3,3"}), "collective.ranks");
  EXPECT_EQ(error_key({"--ranks", "x"}), "collective.ranks");
  EXPECT_EQ(error_key({"--ranks", "0-3", "-g", "2"}), "collective.ranks");
  EXPECT_EQ(error_key({"-b", "1G", "-e", "1M"}), "collective.maxbytes");
  EXPECT_EQ(error_key({"-f", "1.5"}), "collective.stepfactor");
  EXPECT_EQ(error_key({"-b", "8", "-e", "16", "-i", "0"}), "collective.stepbytes");
  EXPECT_EQ(error_key({"-b", "1", "-e", "1G", "-i", "1"}), "collective.stepbytes");  // too many
  EXPECT_EQ(error_key({"--algo", "collnet"}), "collective.algo");
  EXPECT_EQ(error_key({"--proto", "ll256"}), "collective.proto");
  EXPECT_EQ(error_key({"--cluster", "dgx-h1000"}), "collective.cluster.preset");
  EXPECT_EQ(error_key({"--collective", "send_recv"}), "collective.ranks");
  EXPECT_EQ(error_key({"--nodes", "0"}), "collective.nodes");
  EXPECT_EQ(error_key({"-g", "9"}), "collective.ngpus");
  EXPECT_EQ(error_key({"-t", "0"}), "collective.nthreads");
  EXPECT_EQ(error_key({"--nprocs", "3", "-g", "4"}), "collective.ngpus");
  EXPECT_EQ(error_key({"--collective", "broadcast", "-r", "8"}), "collective.root");
  EXPECT_EQ(error_key({"--collective", "broadcast", "-r", "all"}), "collective.root");
  EXPECT_EQ(error_key({"-n", "many"}), "collective.iters");
  EXPECT_EQ(error_key({"-G", "x"}), "collective.cudagraph");
  EXPECT_EQ(error_key({"--nccl-tests-version", "3.0"}), "collective.nccl-tests-version");
  EXPECT_EQ(error_key({"--nccl-version", "3.1"}), "collective.nccl-version");
  EXPECT_EQ(error_key({"--op"}), "collective.op");
  EXPECT_EQ(error_key({"--validate", "/nonexistent/file.json"}), "collective.validate");
}

TEST(collectiveCommand, HelpExitsZero) {
  int rc = -1;
  std::string out = run_captured({"--help"}, &rc);
  EXPECT_EQ(rc, 0);
  for (const char* s : {"--validate", "--collective", "-o [ --op ]", "-d [ --datatype ]",
                        "-g [ --ngpus ]", "-n [ --iters ]", "no effect on the prediction"}) {
    EXPECT_NE(out.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace zerosim::cli
