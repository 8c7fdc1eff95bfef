// `zerosim calibrate`'s refits: the gemm_sustained and layer_host_op_time searches' argmin and
// tie rule against a brute-force pass of validate_published over the same grid, on their own
// calibration family only (the MAPE values themselves are validate_published's, checked in
// published_test.cpp), the NCCL launch refit against the measurement file read here and the
// figures fitted_constants.h declares, and the grid parser's refusals. The declared grids over
// the whole calibration families are not searched here (26 x 16 and 13 x 720 simulations);
// `zerosim calibrate` prints them; the gemm one does not give the shipped 0.85 (0.93,
// docs/VALIDATION.md#refitting-the-declared-constants).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/fitted/fitted_constants.h"
#include "sim/report/calibrate_report.h"
#include "sim/run/calibrate.h"
#include "sim/run/published.h"
#include "sim/scenario/scenario.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

// A family's step-time MAPE at one setting, straight from validate-published's library entry
// with the settings spelled out here.
double family_mape(const json& cases, const std::string& family, const std::string& setting) {
  const PublishedSummary s = validate_published(cases, {"sim.network=analytical", setting}, 2);
  for (const auto& [name, e] : s.by_family) {
    if (name == family) return e.time_mape_pct;
  }
  ADD_FAILURE() << "no family " << family;
  return 0;
}

// The search's grid against the brute-force MAPE of `calibration` (the family's cases of `doc`)
// at each of `settings`; the argmin and its tie rule.
void expect_brute_force_argmin(const ConstantRefit& fit, const json& calibration,
                               const std::vector<std::string>& settings,
                               const std::vector<double>& values) {
  const std::string family = fit.constant->calibration_family;
  std::vector<double> brute;
  for (const auto& v : settings) brute.push_back(family_mape(calibration, family, v));
  ASSERT_EQ(fit.grid.size(), values.size());
  EXPECT_EQ(fit.calibration_cases, static_cast<int>(calibration["cases"].size()));
  double refit_mape = -1;
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(fit.grid[i].first, values[i]);
    EXPECT_EQ(fit.grid[i].second, brute[i]) << settings[i];
    if (fit.grid[i].first == fit.refit) refit_mape = brute[i];
  }
  ASSERT_GE(refit_mape, 0) << "refit " << fit.refit << " is not on the grid";
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_LE(refit_mape, brute[i]) << "refit " << fit.refit << " vs " << settings[i];
    // Ties go to the smaller value.
    if (brute[i] == refit_mape) {
      EXPECT_LE(fit.refit, values[i]);
    }
  }
  // The grid's MAPE moves with the value: a search over a flat function would prove nothing.
  EXPECT_NE(brute.front(), brute.back());
}

// A cases document of the bundled cases whose ids `pick` takes.
template <class Pick>
json bundled_subset(Pick pick) {
  json doc = {{"format", "zerosim-published-cases/1"}, {"cases", json::array()}};
  const json all = bundled_cases();
  for (const auto& c : all["cases"]) {
    if (pick(c)) doc["cases"].push_back(c);
  }
  return doc;
}

TEST(reportCalibrate, GemmRefitIsTheBruteForceArgminOnAShortGrid) {
  const GemmGrid grid = parse_gemm_grid("0.80:0.90:0.05");
  ASSERT_EQ(grid.hundredths(), (std::vector<int>{80, 85, 90}));
  // The three smallest SC21 Table 1 runs (32-128 GPUs) and one evaluation case, which the
  // search must leave out: the whole calibration set takes ~40 s in Release on a shared machine,
  // far too long under ASan.
  const auto sc21 = [](const json& c) {
    const std::string id = c["id"];
    return id == "megatron-sc21-t1-1.7B" || id == "megatron-sc21-t1-3.6B" ||
           id == "megatron-sc21-t1-7.5B";
  };
  bool evaluation_added = false;
  const json doc = bundled_subset([&](const json& c) {
    if (sc21(c)) return true;
    if (c["family"] != "torchtitan" || evaluation_added) return false;
    return evaluation_added = true;
  });
  const json cases = bundled_subset(sc21);
  ASSERT_EQ(cases["cases"].size(), 3u);
  ASSERT_EQ(doc["cases"].size(), 4u);
  const ConstantRefit fit = search_constant(doc, gemm_sustained_grid(grid), 2);
  EXPECT_EQ(fit.constant, &fitted::kGemmSustained);
  EXPECT_EQ(fit.shipped, 0.85);
  expect_brute_force_argmin(
      fit, cases,
      {"fitted.gemm_sustained=0.80", "fitted.gemm_sustained=0.85", "fitted.gemm_sustained=0.90"},
      {0.80, 0.85, 0.90});
}

TEST(reportCalibrate, HostOpTimeRefitIsTheBruteForceArgminOnItsOwnFamily) {
  // Three single-node vTrain runs at micro-batch 1 (host-bound) of the calibration half, and
  // the first one of the held-out half, which the search must leave out.
  int calibration_taken = 0;
  bool held_out_added = false;
  const auto take = [&](const json& c) {
    if (c["training"]["micro_batch_size"] != 1) return false;
    if (c["family"] == "vtrain-h2048") return calibration_taken++ < 3;
    if (c["family"] != "vtrain" || held_out_added) return false;
    return held_out_added = true;
  };
  const json doc = bundled_subset(take);
  int n = 0;
  const json cases = bundled_subset([&](const json& c) {
    return c["family"] == "vtrain-h2048" && c["training"]["micro_batch_size"] == 1 && n++ < 3;
  });
  ASSERT_EQ(doc["cases"].size(), 4u);
  ASSERT_EQ(cases["cases"].size(), 3u);
  ConstantGrid grid = layer_host_op_time_grid();
  EXPECT_EQ(grid.points.front(), 6);
  EXPECT_EQ(grid.points.back(), 18);
  EXPECT_EQ(grid.setting(12), "fitted.layer_host_op_time=12us");
  grid.points = {6, 12, 18};
  const ConstantRefit fit = search_constant(doc, grid, 2);
  EXPECT_EQ(fit.constant, &fitted::kLayerHostOpTime);
  EXPECT_EQ(fit.shipped, 13e-6);
  expect_brute_force_argmin(fit, cases,
                            {"fitted.layer_host_op_time=6us", "fitted.layer_host_op_time=12us",
                             "fitted.layer_host_op_time=18us"},
                            {6e-6, 12e-6, 18e-6});
}

// Each constant a grid refits names a family of the split's calibration set; the others name
// none. A value written by setting(double) reads back exactly.
TEST(reportCalibrate, FittedConstantsNameTheirCalibrationFamily) {
  for (const ConstantGrid& g : {gemm_sustained_grid(GemmGrid{}), layer_host_op_time_grid()}) {
    const PublishedFamily* fam = published_split().find(g.constant->calibration_family);
    ASSERT_NE(fam, nullptr) << g.constant->key;
    EXPECT_EQ(fam->set, "calibration") << g.constant->key;
    ScenarioInputs in;
    in.sets = {g.setting(g.constant->value)};
    const Scenario s = resolve_scenario(scenario_document(in));
    const auto read_back = [&](const Scenario& sc) {
      return g.constant == &fitted::kGemmSustained ? sc.fitted.gemm_sustained
                                                   : sc.fitted.layer_host_op_time;
    };
    EXPECT_EQ(read_back(s), g.constant->value) << g.setting(g.constant->value);
    in.sets = {g.setting(g.points.back())};
    const Scenario at_end = resolve_scenario(scenario_document(in));
    EXPECT_EQ(read_back(at_end), g.points.back() / g.per_unit)
        << g.setting(g.points.back());
  }
  EXPECT_STREQ(fitted::kNcclLaunchOverhead.calibration_family, "");
  for (const auto& c : fitted::kAll) {
    const std::string family = c.calibration_family;
    if (!family.empty()) {
      EXPECT_EQ(published_split().find(family)->set, "calibration") << c.key;
    }
  }
}

TEST(reportCalibrate, NcclLaunchRefitReproducesTheDeclaredConstant) {
  std::ifstream f(ZEROSIM_SOURCE_DIR "/validate/measurements/collectives.json");
  ASSERT_TRUE(f);
  const json doc = json::parse(f);
  EXPECT_EQ(doc, bundled_collectives());
  const LaunchRefit fit = refit_nccl_launch(doc);
  ASSERT_EQ(fit.points.size(), 2u);
  // The measured 32 KiB times as the file gives them: 43.83 us; 32 KiB / 0.82 GB/s algbw.
  EXPECT_EQ(fit.points[0].curve, "dgx-a100-1node-allreduce-nccltests");
  EXPECT_DOUBLE_EQ(fit.points[0].measured_us, 43.83);
  EXPECT_EQ(fit.points[1].curve, "h200-1node-allreduce-torchbench-nvls");
  EXPECT_DOUBLE_EQ(fit.points[1].measured_us, 32768 / 0.82e3);
  // fitted_constants.h's record: the model sits 27.8 and 24.6 us below the measurements (the
  // first from rounded operands, 43.8 - 16.0; unrounded 43.83 - 15.96 = 27.87).
  EXPECT_NEAR(fit.points[0].measured_us - fit.points[0].model_us, 27.8, 0.1);
  EXPECT_NEAR(fit.points[1].measured_us - fit.points[1].model_us, 24.6, 0.1);
  EXPECT_NEAR(fit.mean_us, (27.8 + 24.6) / 2, 0.05);
  EXPECT_EQ(fit.refit_s, fitted::kNcclLaunchOverhead.value);
  EXPECT_EQ(fit.refit_s, 25e-6);
  EXPECT_TRUE(fit.reproduces());
  // Without the 32 KiB point of a named curve there is nothing to fit.
  json cut = doc;
  for (auto& c : cut) {
    if (c["id"] == "h200-1node-allreduce-torchbench-nvls") c["data"] = json::array();
  }
  EXPECT_THROW(refit_nccl_launch(cut), InputError);
}

TEST(reportCalibrate, GridParsing) {
  const GemmGrid d = parse_gemm_grid("0.70:0.95:0.01");
  EXPECT_EQ(d.hundredths().size(), 26u);
  EXPECT_EQ(d.hundredths().front(), 70);
  EXPECT_EQ(d.hundredths().back(), 95);
  EXPECT_EQ(parse_gemm_grid("0.5:1:0.25").hundredths(), (std::vector<int>{50, 75, 100}));
  EXPECT_EQ(parse_gemm_grid("0.85:0.85:0.01").hundredths(), (std::vector<int>{85}));
  for (const char* bad : {"", "0.7", "0.7:0.9", "0.7:0.9:0.01:1", "0.9:0.7:0.01", "0.7:0.9:0",
                          "0.7:1.1:0.1", "0.01:0.9:0.01", "0.7:0.9:0.005", "a:b:c", "-0.7:0.9:0.1",
                          "0.7:0.9:.", "1e-1:0.9:0.1"}) {
    try {
      parse_gemm_grid(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--grid"), std::string::npos) << e.what();
    }
  }
}

// The same result prints the same text and JSON, and the JSON holds the text's figures.
TEST(reportCalibrate, ReportCarriesTheFigures) {
  CalibrateResult r;
  r.settings = calibrate_settings();
  ConstantRefit gemm;
  gemm.constant = &fitted::kGemmSustained;
  gemm.shipped = 0.85;
  gemm.refit = 0.83;
  gemm.spec = "0.83:0.85:0.02";
  gemm.grid = {{0.83, 4.5}, {0.85, 5.25}};
  gemm.calibration_cases = 16;
  ConstantRefit host;
  host.constant = &fitted::kLayerHostOpTime;
  host.shipped = host.refit = 12e-6;
  host.spec = "12us:12us:1us";
  host.grid = {{12e-6, 7.75}};
  host.calibration_cases = 720;
  r.refits = {gemm, host};
  r.at_shipped.calibration.cases = 16;
  r.at_shipped.calibration.time_mape_pct = 5.25;
  r.at_refit.calibration.cases = 16;
  r.at_refit.calibration.time_mape_pct = 4.5;
  r.launch.points = {{"a", "s", 32768, 43.83, 16.0}};
  r.launch.mean_us = 27.83;
  r.launch.refit_s = 30e-6;
  r.launch.shipped_s = 25e-6;
  EXPECT_FALSE(r.reproduces());
  const std::string text = calibrate_text(r);
  EXPECT_NE(text.find("DIFFERS FROM"), std::string::npos) << text;
  EXPECT_NE(text.find("5.25"), std::string::npos) << text;
  EXPECT_NE(text.find("4.50"), std::string::npos) << text;
  EXPECT_NE(text.find("7.7500"), std::string::npos) << text;
  EXPECT_NE(text.find("vtrain-h2048 (720 cases)"), std::string::npos) << text;
  EXPECT_EQ(text, calibrate_text(r));
  const json j = calibrate_json(r);
  EXPECT_EQ(j["refits"][0]["key"], "fitted.gemm_sustained");
  EXPECT_EQ(j["refits"][0]["refit"], 0.83);
  EXPECT_EQ(j["refits"][0]["refit_equals_shipped"], false);
  EXPECT_EQ(j["refits"][0]["grid_spec"], "0.83:0.85:0.02");
  EXPECT_EQ(j["refits"][1]["calibration_family"], "vtrain-h2048");
  EXPECT_EQ(j["refits"][1]["refit_equals_shipped"], true);
  EXPECT_EQ(j["at_refit"]["calibration"]["time_mape_pct"], 4.5);
  EXPECT_EQ(j["at_shipped"]["evaluation"]["time_mape_pct"], nullptr);
  EXPECT_EQ(j["nccl_launch_overhead"]["refit_equals_shipped"], false);
  EXPECT_DOUBLE_EQ(j["nccl_launch_overhead"]["points"][0]["difference_us"].get<double>(), 27.83);
}

}  // namespace
}  // namespace zerosim
