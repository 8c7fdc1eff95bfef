// `zerosim collective`: the table and JSON it prints, and one InputError per bad flag.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/cli/collective_command.h"
#include "sim/core/error.h"

namespace zerosim::cli {
namespace {

using nlohmann::json;

std::string run_captured(const std::vector<std::string>& args, int* rc) {
  testing::internal::CaptureStdout();
  *rc = run_collective_command(args);
  return testing::internal::GetCapturedStdout();
}

std::string error_key(const std::vector<std::string>& args) {
  testing::internal::CaptureStdout();
  try {
    run_collective_command(args);
  } catch (const InputError& e) {
    testing::internal::GetCapturedStdout();
    return e.key_path();
  }
  testing::internal::GetCapturedStdout();
  ADD_FAILURE() << "no InputError";
  return "";
}

// 8 B to 1 MiB by 4: 8, 32, ..., 524288 = 9 sizes, after 2 header lines.
TEST(collectiveCommand, PrintsOneRowPerSize) {
  int rc = -1;
  std::string out =
      run_captured({"--cluster", "dgx-h100", "--nodes", "2", "-b", "8", "-e", "1M", "-f", "4"}, &rc);
  EXPECT_EQ(rc, 0);
  std::istringstream in(out);
  std::string line;
  int header = 0, rows = 0;
  while (std::getline(in, line)) (line.rfind("#", 0) == 0 ? header : rows)++;
  EXPECT_EQ(header, 2);
  EXPECT_EQ(rows, 9);
  EXPECT_NE(out.find("16 ranks"), std::string::npos);
}

// JSON rows carry nccl-tests' definitions: algbw = size / time, busbw = algbw x 2(n-1)/n.
TEST(collectiveCommand, JsonRowsFollowNcclTests) {
  int rc = -1;
  std::string out = run_captured({"--cluster", "dgx-a100-80gb", "--op", "all_reduce", "-b", "1K",
                                  "-e", "1G", "-f", "32", "--json", "-"},
                                 &rc);
  EXPECT_EQ(rc, 0);
  json j = json::parse(out);
  ASSERT_EQ(j["rows"].size(), 5u);
  for (const auto& r : j["rows"]) {
    const double bytes = r["bytes"].get<double>();
    const double t = r["time_us"].get<double>();
    EXPECT_NEAR(r["algbw_GBps"].get<double>(), bytes / (t * 1e3), 1e-9 * bytes / t);
    EXPECT_NEAR(r["busbw_GBps"].get<double>(), r["algbw_GBps"].get<double>() * 1.75, 1e-9);
    EXPECT_TRUE(r.contains("algorithm"));
    EXPECT_TRUE(r.contains("protocol"));
  }
  EXPECT_EQ(j["rows"].back()["algorithm"], "ring");
  EXPECT_EQ(j["nccl_version"], "2.18");
}

TEST(collectiveCommand, RanksAlgoAndFabric) {
  int rc = -1;
  std::string out = run_captured({"--cluster", "dgx-h100", "--nodes", "4", "--ranks", "0-31:8",
                                  "--algo", "ring", "--proto", "Simple", "-b", "1G", "-e", "1G",
                                  "--oversubscription", "2", "--json", "-"},
                                 &rc);
  json j = json::parse(out);
  EXPECT_EQ(j["ranks"], json({0, 8, 16, 24}));
  EXPECT_EQ(j["rows"][0]["algorithm"], "ring");
  EXPECT_EQ(j["rows"][0]["protocol"], "Simple");
  EXPECT_TRUE(j["fabric"].get<bool>());
  out = run_captured({"--ranks", "0,8", "--nodes", "2", "--op", "send_recv", "-b", "1M", "-e",
                      "1M", "--json", "-"},
                     &rc);
  EXPECT_EQ(json::parse(out)["rows"][0]["algorithm"], "p2p");
}

TEST(collectiveCommand, BadFlagsNameTheirKey) {
  EXPECT_EQ(error_key({"--bogus"}), "collective");
  EXPECT_EQ(error_key({"--op", "allreduse"}), "collective.op");
  EXPECT_EQ(error_key({"--ranks", "0-99"}), "collective.ranks");
  EXPECT_EQ(error_key({"--ranks", "3,3"}), "collective.ranks");
  EXPECT_EQ(error_key({"--ranks", "x"}), "collective.ranks");
  EXPECT_EQ(error_key({"-b", "1G", "-e", "1M"}), "collective.maxbytes");
  EXPECT_EQ(error_key({"-f", "1"}), "collective.stepfactor");
  EXPECT_EQ(error_key({"--algo", "collnet"}), "collective.algo");
  EXPECT_EQ(error_key({"--proto", "ll256"}), "collective.proto");
  EXPECT_EQ(error_key({"--cluster", "dgx-h1000"}), "collective.cluster.preset");
  EXPECT_EQ(error_key({"--op", "send_recv"}), "collective.ranks");
  EXPECT_EQ(error_key({"--nodes", "0"}), "collective.nodes");
  EXPECT_EQ(error_key({"--gpus", "9"}), "collective.gpus");
  EXPECT_EQ(error_key({"--nccl-version", "3.1"}), "collective.nccl-version");
  EXPECT_EQ(error_key({"--op"}), "collective.op");
  EXPECT_EQ(error_key({"--validate", "/nonexistent/file.json"}), "collective.validate");
}

TEST(collectiveCommand, HelpExitsZero) {
  int rc = -1;
  std::string out = run_captured({"--help"}, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(out.find("--validate"), std::string::npos);
}

}  // namespace
}  // namespace zerosim::cli
