// zerosim sweep / search: point order, determinism across threads, kept infeasible points, CSV,
// and the commands' progress and flag errors (the search's library: search_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sys/wait.h>
#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/explore/sweep.h"
#include "sim/run/simulate.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {
namespace {
using json = nlohmann::json;

const std::string kScenario = std::string(ZEROSIM_SOURCE_DIR) + "/tests/explore/small.json";

std::vector<std::size_t> all_points(const std::vector<VariedKey>& vary) {
  std::vector<std::size_t> idx(point_count(vary));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

// RFC 4180 CSV: quoted fields may hold commas, quotes ("") and newlines.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, in_row = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    in_row = true;
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
    } else if (c == '\n') {
      row.push_back(field);
      field.clear();
      rows.push_back(row);
      row.clear();
      in_row = false;
    } else {
      field += c;
    }
  }
  EXPECT_FALSE(quoted) << "unterminated quote";
  EXPECT_FALSE(in_row) << "last line without newline";
  return rows;
}

TEST(Sweep, CrossProductSizeAndOrderLastVariesFastest) {
  auto vary = parse_vary({"zero.stage=1,2", "training.micro_batch_size=1,2,4"});
  ASSERT_EQ(point_count(vary), 6u);
  const std::vector<std::vector<std::string>> expected = {
      {"1", "1"}, {"1", "2"}, {"1", "4"}, {"2", "1"}, {"2", "2"}, {"2", "4"}};
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(point_values(vary, i), expected[i]) << i;
  const json base = sweep_base_document(kScenario, {});
  auto rows = run_points(base, vary, all_points(vary), 2, ProgressMode::Off);
  ASSERT_EQ(rows.size(), 6u);
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(rows[i].values, expected[i]);
    EXPECT_TRUE(rows[i].ok) << rows[i].error;
  }
  // Bigger micro-batches at the same global batch run fewer, larger steps: peak memory grows.
  EXPECT_LT(rows[0].peak_memory_bytes, rows[2].peak_memory_bytes);
}

TEST(Sweep, RowsIdenticalForOneAndFourThreads) {
  auto vary = parse_vary({"zero.stage=0,1,2,3", "training.micro_batch_size=1,2",
                          "cluster.nic_bandwidth=200Gbps,400Gbps", "parallel.tp=1,2,3"});
  const json base = sweep_base_document(kScenario, {});
  const auto idx = all_points(vary);
  const std::string one = sweep_csv(vary, run_points(base, vary, idx, 1, ProgressMode::Off));
  const std::string four = sweep_csv(vary, run_points(base, vary, idx, 4, ProgressMode::Off));
  EXPECT_EQ(one, four);
  EXPECT_EQ(sweep_json(vary, run_points(base, vary, idx, 3, ProgressMode::Off)).dump(),
            sweep_json(vary, rows_from_json(rows_to_json(
                                 run_points(base, vary, idx, 1, ProgressMode::Off))))
                .dump());
}

TEST(Sweep, InfeasiblePointKeptWithReasonAndOomPointSimulated) {
  auto vary = parse_vary({"parallel.tp=1,3", "zero.stage=0,3"});
  const json base = sweep_base_document(kScenario, {"training.micro_batch_size=2"});
  auto rows = run_points(base, vary, all_points(vary), 2, ProgressMode::Off);
  ASSERT_EQ(rows.size(), 4u);
  // tp = 3 does not divide the 8 GPUs: kept, with the reason.
  for (std::size_t i : {2u, 3u}) {
    EXPECT_FALSE(rows[i].ok);
    EXPECT_NE(rows[i].error.find("tp x pp"), std::string::npos) << rows[i].error;
  }
  // ZeRO-0 of a 7B model on 80 GB GPUs does not fit: simulated anyway, marked.
  EXPECT_TRUE(rows[0].ok) << rows[0].error;
  EXPECT_FALSE(rows[0].fits_in_memory);
  EXPECT_GT(rows[0].step_time_s, 0);
  EXPECT_TRUE(rows[1].ok) << rows[1].error;
  EXPECT_TRUE(rows[1].fits_in_memory);
}

TEST(Sweep, CsvParsesWithOneFieldPerColumn) {
  auto vary = parse_vary({"parallel.tp=1,3", "training.micro_batch_size=1,2"});
  const json base = sweep_base_document(kScenario, {});
  auto rows = run_points(base, vary, all_points(vary), 2, ProgressMode::Off);
  const auto table = parse_csv(sweep_csv(vary, rows));
  ASSERT_EQ(table.size(), 5u);
  std::vector<std::string> header = {"parallel.tp", "training.micro_batch_size"};
  for (const auto& c : sweep_metric_columns()) header.push_back(c);
  EXPECT_EQ(table[0], header);
  for (std::size_t r = 1; r < table.size(); ++r) {
    ASSERT_EQ(table[r].size(), header.size()) << r;
    const bool ok = table[r][0] == "1";
    EXPECT_EQ(table[r].back().empty(), ok);
    if (ok) {
      EXPECT_GT(std::stod(table[r][2]), 0);                   // step_time_s
      EXPECT_DOUBLE_EQ(std::stod(table[r][2]), rows[r - 1].step_time_s);  // round-trips
      EXPECT_EQ(std::stoll(table[r][6]), rows[r - 1].peak_memory_bytes);
      EXPECT_TRUE(table[r][7] == "true" || table[r][7] == "false");
    } else {
      EXPECT_EQ(table[r].back(), rows[r - 1].error);  // quoted if it holds commas
      EXPECT_EQ(table[r][2], "");
    }
  }
}

// Each overhead column is that part of the point's step breakdown (StepBreakdown), the same
// simulated on its own: DeepSpeed's stage 3 slices every gradient tensor once per rank on the
// host (comm_overhead_s), stage 2 does not.
TEST(Sweep, OverheadColumnsAreTheStepsBreakdown) {
  auto vary = parse_vary({"zero.stage=2,3"});
  const json base = sweep_base_document(kScenario, {});
  const auto rows = run_points(base, vary, all_points(vary), 1, ProgressMode::Off);
  ASSERT_EQ(rows.size(), 2u);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    ASSERT_TRUE(rows[i].ok) << rows[i].error;
    const StepBreakdown b =
        simulate_step(resolve_scenario(point_document(base, vary, i))).report.breakdown;
    EXPECT_EQ(rows[i].exposed_dp_s, b.exposed_by_group[0]);
    EXPECT_EQ(rows[i].exposed_ep_s, b.exposed_by_group[3]);
    EXPECT_EQ(rows[i].exposed_cp_s, b.exposed_by_group[4]);
    EXPECT_EQ(rows[i].bubble_s, b.bubble_s);
    EXPECT_EQ(rows[i].offload_s, b.offload_s);
    EXPECT_EQ(rows[i].comm_overhead_s, b.comm_overhead_s);
  }
  EXPECT_EQ(rows[0].comm_overhead_s, 0);
  EXPECT_GT(rows[1].comm_overhead_s, 0);
  const auto table = parse_csv(sweep_csv(vary, rows));
  const auto& header = table[0];
  const auto column = std::find(header.begin(), header.end(), "comm_overhead_s") - header.begin();
  ASSERT_LT(static_cast<std::size_t>(column), header.size());
  EXPECT_DOUBLE_EQ(std::stod(table[2][static_cast<std::size_t>(column)]), rows[1].comm_overhead_s);
}

TEST(Sweep, BadVaryFlagsNameTheFlag) {
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"zero.stag=1,2"}, {"zero.stage"}, {"zero.stage=1,,2"},
                                             {"zero.stage=1", "zero.stage=2"}, {"=1"},
                                             // a value outside the key's domain is bad input,
                                             // not an infeasible point
                                             {"zero.stage=1,5"}, {"model=llama2-7b,lama"}}) {
    try {
      parse_vary(flags);
      ADD_FAILURE() << flags[0] << " accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(e.key_path(), "--vary") << e.what();
    }
  }
  try {
    sweep_base_document(kScenario, {"zero.nope=1"});
    ADD_FAILURE() << "bad --set accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "--set");
  }
}

// The inputs' warnings (here a Hugging Face config's defaulted training length) reach the sweep's
// JSON, as simulate's report has them.
TEST(Sweep, InputWarningsAreInItsJson) {
  const std::string config = std::string(ZEROSIM_SOURCE_DIR) + "/tests/model/hf_configs/llama-2-7b.json";
  const json base = sweep_base_document(kScenario, {"model=" + config});
  const auto vary = parse_vary({"zero.stage=1,2"});
  const std::vector<InputWarning> warnings = sweep_warnings(base, vary);
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings[0].key_path, "model(" + config + ").seq_length");
  const json j = sweep_json(vary, {}, warnings);
  EXPECT_EQ(j["warnings"][0]["key"], warnings[0].key_path);
}

TEST(Sweep, BatchKeysFollowDeepSpeedsRuleLikeTheFlags) {
  // All three batch keys given: varying the micro-batch drops the accumulation steps.
  const json base = sweep_base_document(
      kScenario, {"training.gradient_accumulation_steps=2"});
  auto vary = parse_vary({"training.micro_batch_size=1,2"});
  auto doc = point_document(base, vary, 1);
  EXPECT_FALSE(doc["training"].contains("gradient_accumulation_steps"));
  EXPECT_EQ(doc["training"]["global_batch_size"], 64);
  EXPECT_EQ(doc["training"]["micro_batch_size"], 2);
  EXPECT_EQ(doc["sim"]["allow_oom"], true);
  auto vary_gpus = parse_vary({"cluster.num_gpus=8,16"});
  EXPECT_FALSE(point_document(base, vary_gpus, 0)["cluster"].contains("nodes"));
}

// --- the binary ---------------------------------------------------------------------------

struct BinRun {
  int status;
  std::string err, out;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(path);
  return ss.str();
}

// Runs the binary with stdout and stderr in files (neither is a terminal).
BinRun run_bin(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string stem = (dir / ("explore_" + std::to_string(::getpid()))).string();
  const std::string cmd =
      std::string(ZEROSIM_BIN) + " " + args + " >" + stem + ".out 2>" + stem + ".err";
  const int rc = std::system(cmd.c_str());
  BinRun r{WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, "", ""};
  r.err = slurp(stem + ".err");
  r.out = slurp(stem + ".out");
  return r;
}

TEST(SweepCommand, BadFlagsExitTwoNamingTheFlagAndWriteNothing) {
  const auto out = std::filesystem::temp_directory_path() / "explore_bad.csv";
  std::filesystem::remove(out);
  const std::string o = " --out " + out.string();
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"--vary zero.stag=1,2" + o, "--vary"},
           {"--vary zero.stage=1,2 --out x.txt", "--out"},
           {"--vary zero.stage=1,2 --jobs -2" + o, "--jobs"},
           {"--vary zero.stage=1 --set nope=1" + o, "--set"},
           {o, "--vary"},
           {"--vary zero.stage=1", "--out"}}) {
    BinRun r = run_bin("sweep " + kScenario + " " + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << ": " << r.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << args;
  }
}

TEST(SweepCommand, WritesCsvAndJson) {
  const auto dir = std::filesystem::temp_directory_path();
  for (const char* ext : {"csv", "json"}) {
    const auto out = dir / (std::string("explore_ok_") + std::to_string(::getpid()) + "." + ext);
    BinRun r = run_bin("sweep " + kScenario + " --vary zero.stage=1,2 --jobs 2 --out " + out.string());
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");  // no progress bar when stderr is not a terminal
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    if (std::string(ext) == "json") {
      json j = json::parse(ss.str());
      EXPECT_EQ(j["format"], "zerosim-sweep/1");
      EXPECT_EQ(j["rows"].size(), 2u);
      EXPECT_EQ(j["rows"][1]["point"]["zero.stage"], 2);
    } else {
      EXPECT_EQ(parse_csv(ss.str()).size(), 3u);
    }
    std::filesystem::remove(out);
  }
}

TEST(SweepCommand, ProgressOnStderrOnlyWhenAskedAndTheFileUnchanged) {
  const std::string args = "sweep " + kScenario + " --vary zero.stage=1,2,3 --jobs 2 --out -";
  BinRun quiet = run_bin(args);
  BinRun loud = run_bin(args + " --progress");
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  ASSERT_EQ(loud.status, 0) << loud.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_NE(loud.err.find("sweep ["), std::string::npos) << loud.err;
  EXPECT_NE(loud.err.find("3/3"), std::string::npos) << loud.err;
  EXPECT_EQ(loud.out, quiet.out);
  EXPECT_EQ(loud.out.find("sweep ["), std::string::npos);
}

TEST(SearchCommand, ProgressOnStderrOnlyWhenAskedAndStdoutUnchanged) {
  const std::string args =
      "search --model llama2-7b --cluster dgx-h100 --nodes 1 --gbs 32 --zero-stages 1 "
      "--max-pp 2 --top 3 --jobs 2";
  for (const char* json_out : {"", " --json -"}) {
    BinRun quiet = run_bin(args + json_out);
    BinRun loud = run_bin(args + json_out + " --progress");
    ASSERT_EQ(quiet.status, 0) << quiet.err;
    ASSERT_EQ(loud.status, 0) << loud.err;
    EXPECT_EQ(quiet.err, "");  // stderr is not a terminal: no progress unless asked
    EXPECT_NE(loud.err.find("search: screening"), std::string::npos) << loud.err;
    EXPECT_EQ(loud.out, quiet.out);
    EXPECT_NE(quiet.out.find(*json_out ? "\"bottleneck\"" : "bottlenecks:"), std::string::npos)
        << quiet.out;
  }
}

TEST(SearchCommand, BadConstraintsExitTwoNamingTheFlag) {
  const std::string base = "search --model llama2-7b --cluster dgx-h100 --nodes 1 --gbs 32 ";
  for (const auto& [args, flag] : std::vector<std::pair<std::string, std::string>>{
           {"--tp 0", "--tp"},
           {"--tp 3", "--tp"},
           {"--max-pp 0", "--max-pp"},
           {"--seq-length 0", "--seq-length"},
           {"--memory-headroom 150%", "--memory-headroom"},
           {"--memory-headroom 10", "--memory-headroom"},
           {"--set parallel.tp=2", "--tp"},
           {"--zero-stages 4", "--zero-stages"},
           {"--top 0", "--top"}}) {
    BinRun r = run_bin(base + args);
    EXPECT_EQ(r.status, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(SearchCommand, MissingModelIsAnInputError) {
  BinRun r = run_bin("search --cluster dgx-h100 --nodes 1");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace zerosim::explore
