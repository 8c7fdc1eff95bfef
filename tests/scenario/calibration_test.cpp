// --calibration: measured rates become scenario keys.
#include <gtest/gtest.h>

#include "sim/core/error.h"
#include "sim/scenario/scenario.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

TEST(scenarioCalibration, MeasuredRatesBecomeScenarioKeys) {
  // A100 80GB: bf16 peak 312 TFLOP/s, HBM 2039 GB/s (the preset's datasheet values). The best
  // bf16 GEMM measured, 260 TFLOP/s, gives 260 / 312; a 1,631.2 GB/s copy gives 0.8; the fp16
  // entry does not count for a bf16 run; unknown keys are accepted.
  json doc = {{"model", "gpt3-1.3b"}, {"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}}}};
  const json cal = {{"format", "zerosim-calibration/1"},
                    {"gemm", {{{"m", 8192}, {"n", 8192}, {"k", 8192}, {"dtype", "bf16"}, {"tflops", 260.0}},
                              {{"m", 4096}, {"n", 4096}, {"k", 4096}, {"dtype", "bf16"}, {"tflops", 200.0}},
                              {{"m", 8192}, {"n", 8192}, {"k", 8192}, {"dtype", "fp16"}, {"tflops", 300.0}}}},
                    {"hbm_copy_GBps", 1631.2},
                    {"adam_params_per_s", 6.0e10},
                    {"a_later_key", true}};
  ScenarioDocument d;
  d.doc = doc;
  apply_calibration(d, cal, "cal.json");
  Scenario s = resolve_scenario(d);
  EXPECT_NEAR(s.cluster.gpu.gemm_efficiency, 260.0 / 312.0, 1e-12);
  EXPECT_NEAR(s.cluster.gpu.hbm_efficiency, 1631.2e9 / s.cluster.gpu.hbm_bandwidth, 1e-12);
  EXPECT_NEAR(s.cluster.gpu.hbm_efficiency, 0.8, 1e-3);
  EXPECT_DOUBLE_EQ(s.sim.adam_params_per_s, 6.0e10);
  // The resolved scenario carries them: it reproduces the run without the file.
  Scenario again = resolve_scenario(s.resolved);
  EXPECT_DOUBLE_EQ(again.cluster.gpu.gemm_efficiency, s.cluster.gpu.gemm_efficiency);
  EXPECT_DOUBLE_EQ(again.sim.adam_params_per_s, 6.0e10);
}

TEST(scenarioCalibration, BadDocumentsNameTheKey) {
  auto key_of = [](const json& cal) {
    ScenarioDocument doc;
    doc.doc = {{"cluster", {{"preset", "dgx-a100-80gb"}, {"nodes", 1}}}};
    try {
      apply_calibration(doc, cal, "c.json");
    } catch (const InputError& e) {
      return e.key_path();
    }
    return std::string("accepted");
  };
  EXPECT_EQ(key_of({{"format", "zerosim-calibration/2"}}), "calibration(c.json).format");
  EXPECT_EQ(key_of({{"format", "zerosim-calibration/1"}, {"hbm_copy_GBps", -1}}),
            "calibration(c.json).hbm_copy_GBps");
  EXPECT_EQ(key_of({{"format", "zerosim-calibration/1"}, {"gemm", {{{"dtype", "bf16"}}}}}),
            "calibration(c.json).gemm[0].tflops");
  EXPECT_EQ(key_of(json::array()), "calibration(c.json)");
}

}  // namespace
}  // namespace zerosim
