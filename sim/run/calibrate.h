#pragma once
// `zerosim calibrate`: refit every fitted constant of sim/fitted/fitted_constants.h by the method
// its declaration states, on the data it names, and report the error it leaves on the evaluation
// set (validate/cases/split.json) at the shipped value and at the refit one. Nothing here changes
// a constant: the report says whether the refit reproduces the shipped value.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/collective/nccl_validation.h"
#include "sim/run/published.h"

namespace zerosim {

// A grid of fitted.gemm_sustained values in integer hundredths, so that stepping through it
// accumulates no floating-point error: lo, lo + step, ... <= hi.
struct GemmGrid {
  int lo = 70, hi = 95, step = 1;  // kGemmSustained's method: 0.70 to 0.95 in steps of 0.01
  std::vector<int> hundredths() const;
};
// "LO:HI:STEP" in decimals with at most two places, 0.05 <= LO <= HI <= 1 (the key's range),
// STEP > 0. InputError naming "--grid" otherwise.
GemmGrid parse_gemm_grid(const std::string& text);

// The error of one whole run (calibration and evaluation cases) at one gemm_sustained value.
struct CalibrationRun {
  double gemm_sustained = 0;
  ErrorSummary calibration, evaluation;
  std::vector<std::pair<std::string, ErrorSummary>> evaluation_families;  // split's order
};

struct GemmRefit {
  double shipped = 0, refit = 0;
  GemmGrid searched;
  std::vector<std::pair<double, double>> grid;  // (value, calibration time MAPE %), grid order
  int calibration_cases = 0;
  CalibrationRun at_shipped, at_refit;  // at_refit is at_shipped where refit == shipped
  bool reproduces() const { return refit == shipped; }
};

struct LaunchRefit {
  std::vector<nccl::LaunchFitPoint> points;
  double mean_us = 0;      // mean of measured - model over the points
  double rounding_us = 5;  // the refit is mean_us rounded to the nearest multiple of this
  double refit_s = 0, shipped_s = 0;
  bool reproduces() const;
};

struct CalibrateOptions {
  GemmGrid grid;
  int jobs = 0;              // as validate_published: 0 = one per hardware thread
  bool with_vtrain = false;  // evaluation includes the families out of the default run
};

struct CalibrateResult {
  std::vector<std::string> settings;  // applied to every case besides the gemm value
  GemmRefit gemm;
  LaunchRefit launch;
};

// The settings every run of the refit uses: the analytical network, as kGemmSustained's method
// says.
const std::vector<std::string>& calibrate_settings();

// The search alone: the calibration cases of `cases_doc` at each value of `grid` (settings
// calibrate_settings()), their step-time MAPE, and the argmin (ties: the smaller value). Fills
// shipped, searched, grid, calibration_cases and refit, not at_shipped / at_refit.
GemmRefit search_gemm_sustained(const nlohmann::json& cases_doc, const GemmGrid& grid, int jobs);

// The search, then calibration and evaluation error at the shipped and the refit value.
// `cases_doc`: the bundled cases or another cases document.
GemmRefit refit_gemm_sustained(const nlohmann::json& cases_doc, const CalibrateOptions& opt);

// kNcclLaunchOverhead's method on `collectives_doc` (validate/measurements/collectives.json's
// format): measured minus model (launch off) at 32 KiB, averaged, rounded to 5 us.
LaunchRefit refit_nccl_launch(const nlohmann::json& collectives_doc);

// validate/measurements/collectives.json as compiled in.
const nlohmann::json& bundled_collectives();

// Both refits on the bundled data.
CalibrateResult calibrate(const CalibrateOptions& opt);

}  // namespace zerosim
