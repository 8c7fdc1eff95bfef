// The background-job what-if from the command line: it needs the flow network (the default), so
// with `sim.network=analytical` or `alpha-beta` the parser refuses it (exit status 2, one line
// naming the key); with flow the run succeeds and the JSON report's network section shows the
// other job.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

struct Outcome {
  int status = -1;
  std::string err;
};

Outcome run(const std::string& args) {
  // Per process: ctest runs this file's tests at once, and so may another checkout's suite.
  const std::string err_path =
      ::testing::TempDir() + "/flow_cli_stderr_" + std::to_string(::getpid()) + ".txt";
  const std::string cmd = std::string(ZEROSIM_BIN) + " " + args + " >/dev/null 2>" + err_path;
  const int raw = std::system(cmd.c_str());
  Outcome r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(err_path);
  std::stringstream ss;
  ss << in.rdbuf();
  r.err = ss.str();
  return r;
}

const char* kSmall = "simulate --model llama2-7b --cluster dgx-h100 --nodes 2 --zero 2 --mbs 2 --gbs 64";

TEST(flowCli, BackgroundJobWithoutFlowExitsTwo) {
  for (const char* network : {"analytical", "alpha-beta"}) {
    const Outcome r = run(std::string(kSmall) + " --set sim.network=" + network +
                          " --set whatif.background_nodes=4");
    EXPECT_EQ(r.status, 2) << network;
    EXPECT_NE(r.err.find("whatif.background_nodes"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  // the default scenario on the analytical network too
  EXPECT_EQ(run("simulate --set sim.network=analytical --set whatif.background_nodes=4").status, 2);
}

// flow is the default network: the background job runs without naming it.
TEST(flowCli, FlowIsTheDefaultNetwork) {
  EXPECT_EQ(run(std::string(kSmall) + " --set whatif.background_nodes=4").status, 0);
}

TEST(flowCli, BackgroundJobWithFlowRuns) {
  const std::string out =
      ::testing::TempDir() + "/flow_cli_report_" + std::to_string(::getpid()) + ".json";
  const Outcome r = run(std::string(kSmall) +
                    " --set sim.network=flow --set whatif.background_nodes=4"
                    " --set whatif.background_placement=after --json " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["network"]["background"]["nodes"], 4);
  EXPECT_EQ(j["network"]["background"]["placement"], "after");
  EXPECT_EQ(j["scenario"]["whatif"]["background_nodes"], 4);
}

}  // namespace
