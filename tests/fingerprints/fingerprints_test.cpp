// Pinned trajectories: every scenario of fingerprints.json, resolved and simulated as `zerosim
// simulate` does, gives exactly the fingerprint, event count and makespan pinned in the table.
// A difference means the simulated step changed: if that is intended, rewrite the table with
// update_fingerprints and explain the change in the commit message (docs/RELIABILITY.md).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <thread>

#include "tests/fingerprints/fingerprint_table.h"

namespace zerosim::fingerprints {
namespace {

std::vector<Entry> load_or_empty() {
  try {
    return entries_of(read_table(default_table_path()));
  } catch (const std::exception&) {
    return {};  // TableIsComplete reports it
  }
}

const std::vector<Entry>& table() {
  static const std::vector<Entry> entries = load_or_empty();
  return entries;
}

TEST(fingerprintsTable, TableIsComplete) {
  ASSERT_NO_THROW(entries_of(read_table(default_table_path())));
  ASSERT_GE(table().size(), 12u);
  std::set<std::string> names;
  for (const Entry& e : table()) {
    EXPECT_TRUE(names.insert(e.name).second) << "duplicate scenario name " << e.name;
    EXPECT_EQ(e.pinned.fingerprint.size(), 16u) << e.name << ": run update_fingerprints";
    EXPECT_FALSE(e.covers.empty()) << e.name << ": say what the scenario is in the table for";
  }
}

// The table covers every feature the issue lists: ZeRO 0-3, TP, SP, PP with each schedule,
// every recompute mode, every framework, folded and all-rank simulation.
TEST(fingerprintsTable, CoversEveryFeature) {
  std::set<std::string> seen;
  for (const Entry& e : table()) {
    const Scenario s = resolve_scenario(e.scenario);
    seen.insert("zero" + std::to_string(s.zero.stage));
    if (s.parallel.tp > 1) seen.insert("tp");
    if (s.parallel.sequence_parallel) seen.insert("sp");
    if (s.parallel.pp > 1) {
      seen.insert(s.parallel.pipeline_schedule == PipelineSchedule::GPipe         ? "gpipe"
                  : s.parallel.pipeline_schedule == PipelineSchedule::Interleaved ? "interleaved"
                                                                                  : "1f1b");
    }
    seen.insert("recompute-" + to_string(s.parallel.recompute));
    seen.insert("framework-" + to_string(s.parallel.framework));
    seen.insert(s.sim.folded ? "folded" : "all");
  }
  for (const char* want :
       {"zero0", "zero1", "zero2", "zero3", "tp", "sp", "gpipe", "1f1b", "interleaved",
        "recompute-none", "recompute-selective", "recompute-full", "framework-deepspeed",
        "framework-megatron", "framework-fsdp", "framework-nanotron", "folded", "all"}) {
    EXPECT_TRUE(seen.count(want)) << "no scenario in the table covers " << want;
  }
}

class fingerprintsPinned : public ::testing::TestWithParam<Entry> {};

TEST_P(fingerprintsPinned, MatchesTable) {
  const Entry& e = GetParam();
  const Pinned now = compute(e.scenario);
  EXPECT_EQ(now.fingerprint, e.pinned.fingerprint)
      << e.name << " (" << e.covers << "): the trajectory changed; if intended, run "
      << "update_fingerprints and explain the change in the commit message";
  EXPECT_EQ(now.events, e.pinned.events) << e.name;
  EXPECT_EQ(now.makespan_ps, e.pinned.makespan_ps) << e.name;
}

// Conservation: on every rank the breakdown's parts (compute by phase, exposed communication,
// bubble, offload waits, the framework's work for its collectives, unexplained waits) add up to
// the step, so that no time the step spends goes unreported.
TEST_P(fingerprintsPinned, BreakdownAccountsForTheWholeStep) {
  const Entry& e = GetParam();
  const Simulation sim = simulate_step(resolve_scenario(e.scenario));
  const double step = ps_to_seconds(sim.result.makespan);
  std::set<int> ranks;
  for (const Op& op : sim.plan.plan.ops) ranks.insert(op.rank);
  for (int rank : ranks) {
    const StepBreakdown b = breakdown_of_rank(sim.plan, sim.result, rank);
    double parts = 0;
    for (const BreakdownPart& p : breakdown_parts(b)) parts += p.seconds;
    EXPECT_NEAR(parts, step, 1e-9 * step) << e.name << " rank " << rank;
  }
}

INSTANTIATE_TEST_SUITE_P(table, fingerprintsPinned, ::testing::ValuesIn(table()),
                         [](const ::testing::TestParamInfo<Entry>& info) {
                           std::string n = info.param.name;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(fingerprintsPinned);

// One engine per thread, four threads at once, every scenario of the table: the same results as
// the table (which one thread computed). Nothing is shared between engines; under ThreadSanitizer
// this also shows the readers' and presets' static tables are safe to share.
TEST(fingerprintsThreads, ConcurrentRunsMatchTheTable) {
  constexpr int kThreads = 4;
  std::vector<std::vector<Pinned>> got(kThreads);
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      try {
        // Each thread walks the table from a different start so that different scenarios overlap.
        const std::size_t n = table().size();
        got[t].resize(n);
        for (std::size_t k = 0; k < n; ++k) {
          const std::size_t i = (k + static_cast<std::size_t>(t) * 3) % n;
          got[t][i] = compute(table()[i].scenario);
        }
      } catch (const std::exception& e) {
        errors[t] = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(errors[t], "") << "thread " << t;
    for (std::size_t i = 0; i < table().size(); ++i) {
      EXPECT_EQ(got[t][i], table()[i].pinned) << "thread " << t << ", " << table()[i].name;
    }
  }
}

// `zerosim simulate SCENARIO --fingerprint` prints the pinned fingerprint (first table entry).
TEST(fingerprintsCli, SimulatePrintsThePinnedFingerprint) {
  ASSERT_FALSE(table().empty());
  namespace fs = std::filesystem;
  const Entry& e = table().front();
  const fs::path dir = fs::path(::testing::TempDir()) / ("zerosim_fingerprint_" + e.name);
  fs::create_directories(dir);
  std::ofstream(dir / "scenario.json") << e.scenario.dump();
  const std::string cmd = "'" ZEROSIM_BIN "' simulate '" + (dir / "scenario.json").string() +
                          "' --fingerprint > '" + (dir / "out.txt").string() + "' 2>&1";
  const int raw = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 0) << cmd;
  std::ifstream in(dir / "out.txt");
  std::stringstream out;
  out << in.rdbuf();
  EXPECT_NE(out.str().find("fingerprint     " + e.pinned.fingerprint), std::string::npos)
      << out.str();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace zerosim::fingerprints
