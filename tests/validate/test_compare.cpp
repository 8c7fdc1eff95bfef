// `compare` on a synthetic replay whose numbers are chosen so every row can be worked out here.
#include <gtest/gtest.h>

#include <sstream>

#include "validate/compare.h"

namespace zv = zerosim::validate;

namespace {

nlohmann::json op(int id, const char* name, const char* kind, const char* what, double predicted, double measured) {
  nlohmann::json o = {{"id", id}, {"name", name}, {"kind", kind}, {"stream", "compute"},
                      {"predicted_start_s", 0}, {"predicted_duration_s", predicted},
                      {"measured_start_s", 0}, {"measured_duration_s", measured}};
  if (std::string(kind) == "compute") o["work"] = what;
  if (std::string(kind) == "collective") o["collective"] = what;
  return o;
}

// Rank 0: mlp 10 ms predicted / 8 ms measured (+25 %), all_reduce 4 / 5.5 ms (-27.3 %),
//         an alloc (left out), an op with neither time (left out).
// Rank 1: mlp 10 / 10 ms (0 %), all_reduce 1 ms / 0 (measured nothing: error n/a).
// Steps: rank 0 20 / 16 ms, rank 1 20 / 25 ms; overall max 20 / 25 ms = -20 %.
// Classes: compute:mlp_forward 20 / 18 ms (+11.1 %), collective:all_reduce 5 / 5.5 ms (-9.1 %).
// Worst ops by |predicted - measured|: r0 mlp (2 ms), r0 all_reduce (1.5 ms), r1 all_reduce
// (1 ms), r1 mlp (0).
nlohmann::json replay() {
  nlohmann::json r0 = {{"rank", 0}, {"step_predicted_s", 0.020}, {"step_measured_s", 0.016},
                       {"ops", {op(0, "fwd mlp", "compute", "mlp_forward", 0.010, 0.008),
                                op(1, "grad all_reduce", "collective", "all_reduce", 0.004, 0.0055),
                                op(2, "alloc x", "alloc", "", 0, 0),
                                op(3, "nothing", "compute", "embed_forward", 0, 0)}}};
  nlohmann::json r1 = {{"rank", 1}, {"step_predicted_s", 0.020}, {"step_measured_s", 0.025},
                       {"ops", {op(0, "fwd mlp", "compute", "mlp_forward", 0.010, 0.010),
                                op(1, "grad all_reduce", "collective", "all_reduce", 0.001, 0)}}};
  return {{"format", "zerosim-replay/1"}, {"backend", "cpu"}, {"device", "test"}, {"ranks", {r0, r1}}};
}

TEST(Compare, RowsAndErrorsAsWorkedOut) {
  const zv::CompareReport r = zv::compare_replay(replay());
  EXPECT_DOUBLE_EQ(r.step.predicted_s, 0.020);
  EXPECT_DOUBLE_EQ(r.step.measured_s, 0.025);
  EXPECT_NEAR(*r.step.error_pct, -20.0, 1e-9);
  ASSERT_EQ(r.rank_steps.size(), 2u);
  EXPECT_NEAR(*r.rank_steps[0].error_pct, 25.0, 1e-9);

  ASSERT_EQ(r.ops.size(), 4u);
  EXPECT_EQ(r.ops[0].label, "r0 #0 fwd mlp");
  EXPECT_NEAR(*r.ops[0].error_pct, 25.0, 1e-9);
  EXPECT_EQ(r.ops[1].label, "r0 #1 grad all_reduce");
  EXPECT_NEAR(*r.ops[1].error_pct, (0.004 - 0.0055) / 0.0055 * 100, 1e-9);
  EXPECT_EQ(r.ops[2].label, "r1 #1 grad all_reduce");
  EXPECT_FALSE(r.ops[2].error_pct.has_value());
  EXPECT_EQ(r.ops[3].label, "r1 #0 fwd mlp");

  ASSERT_EQ(r.classes.size(), 2u);
  EXPECT_EQ(r.classes[0].label, "compute:mlp_forward");
  EXPECT_EQ(r.classes[0].count, 2);
  EXPECT_NEAR(*r.classes[0].error_pct, (0.020 - 0.018) / 0.018 * 100, 1e-9);
  EXPECT_EQ(r.classes[1].label, "collective:all_reduce");
  EXPECT_NEAR(*r.classes[1].error_pct, (0.005 - 0.0055) / 0.0055 * 100, 1e-9);
}

TEST(Compare, SortByPercentPutsUnmeasuredFirstThenLargestError) {
  const zv::CompareReport r = zv::compare_replay(replay(), zv::SortBy::Percent);
  EXPECT_EQ(r.ops[0].label, "r1 #1 grad all_reduce");  // n/a: measured nothing at all
  EXPECT_EQ(r.ops[1].label, "r0 #1 grad all_reduce");  // 27.3 %
  EXPECT_EQ(r.ops[2].label, "r0 #0 fwd mlp");          // 25 %
}

TEST(Compare, PrintsAndWritesJson) {
  const zv::CompareReport r = zv::compare_replay(replay());
  std::ostringstream out;
  zv::print_compare(out, r, 2);
  const std::string text = out.str();
  EXPECT_NE(text.find("+25.0%"), std::string::npos) << text;
  EXPECT_NE(text.find("-27.3%"), std::string::npos) << text;
  EXPECT_NE(text.find("ops, worst first (2 of 4)"), std::string::npos) << text;
  const auto j = zv::compare_json(r, 2);
  EXPECT_EQ(j["format"], "zerosim-compare/1");
  EXPECT_EQ(j["ops"].size(), 2u);
  EXPECT_EQ(j["ops_total"], 4);
  EXPECT_TRUE(j["ops"][0]["error_pct"].is_number());
}

TEST(Compare, RefusesOtherDocuments) {
  EXPECT_THROW(zv::compare_replay({{"format", "zerosim-plan/1"}}), zv::CompareError);
  auto bad = replay();
  bad["ranks"][0]["ops"][0].erase("measured_duration_s");
  EXPECT_THROW(zv::compare_replay(bad), zv::CompareError);
}

}  // namespace
