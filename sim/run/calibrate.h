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
#include "sim/fitted/fitted_constants.h"
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

// What a grid search refits: a fitted constant, the values it tries (integer points over
// `per_unit`: hundredths of gemm_sustained, microseconds of host time, divided so that each value
// is the double its decimal reads as), and the calibration family it is fitted on (the
// constant's declaration names it).
struct ConstantGrid {
  const fitted::FittedConstant* constant = nullptr;
  std::vector<int> points;  // ascending
  double per_unit = 0;      // points per unit of the key's value: 100, or 1e6 (s -> us)
  std::string spec;         // the grid as the user reads it, e.g. "0.70:0.95:0.01"
  std::string setting(int point) const;      // "key=value" exactly at point / per_unit
  std::string setting(double value) const;   // "key=value" that reads back as `value`
};
ConstantGrid gemm_sustained_grid(const GemmGrid& g);
// kLayerHostOpTime's method: 6 to 18 us in steps of 1 us.
ConstantGrid layer_host_op_time_grid();

// The error of one whole run (calibration and evaluation cases) at one set of values.
struct CalibrationRun {
  std::vector<std::pair<std::string, double>> values;  // (key, value) of each refit constant
  ErrorSummary calibration, evaluation;
  std::vector<std::pair<std::string, ErrorSummary>> evaluation_families;  // split's order
};

// One constant's search: its calibration family's step-time MAPE at each grid value, and the
// argmin (ties: the smaller value).
struct ConstantRefit {
  const fitted::FittedConstant* constant = nullptr;
  std::string spec;
  std::vector<std::pair<double, double>> grid;  // (value, family's time MAPE %), grid order
  int calibration_cases = 0;
  double shipped = 0, refit = 0;
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
  bool with_vtrain = false;  // add the families out of the default run (both vtrain halves)
};

struct CalibrateResult {
  std::vector<std::string> settings;  // applied to every case besides the constants' values
  std::vector<ConstantRefit> refits;  // gemm_sustained, layer_host_op_time
  CalibrationRun at_shipped, at_refit;  // every constant shipped / every one refit together
  LaunchRefit launch;
  bool reproduces() const;              // every refit equals its shipped value
};

// The settings every run of the refit uses: the analytical network, as the grid constants'
// methods say.
const std::vector<std::string>& calibrate_settings();

// The search alone on the cases of `cases_doc` whose family is the constant's calibration
// family (settings calibrate_settings(), the other constants at their shipped values).
ConstantRefit search_constant(const nlohmann::json& cases_doc, const ConstantGrid& grid, int jobs);

// Every search, then calibration and evaluation error with every constant at its shipped value
// and with every one at its refit value. `cases_doc`: the bundled cases or another document.
CalibrateResult refit_constants(const nlohmann::json& cases_doc, const CalibrateOptions& opt);

// kNcclLaunchOverhead's method on `collectives_doc` (validate/measurements/collectives.json's
// format): measured minus model (launch off) at 32 KiB, averaged, rounded to 5 us.
LaunchRefit refit_nccl_launch(const nlohmann::json& collectives_doc);

// validate/measurements/collectives.json as compiled in.
const nlohmann::json& bundled_collectives();

// Every refit on the bundled data.
CalibrateResult calibrate(const CalibrateOptions& opt);

}  // namespace zerosim
