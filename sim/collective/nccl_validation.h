#pragma once
// Predicted vs measured for the collective curves of validate/measurements/collectives.json (and any
// further file in the same format): which curves map to a cluster preset, the error of every
// point, and the markdown table docs/VALIDATION.md is generated from
// (`zerosim collective --validate FILE --markdown`).
//
// Bounds asserted (the targets): time within 30 % at <= 64 KiB, bus bandwidth within 15 %
// at >= 64 MiB (single large-size statements count as >= 64 MiB). Points in between, and curves
// whose measurement cannot be reproduced by a preset, are reported with bound 0 (informational).
// Each curve's mapping (preset, NCCL version, forced algorithm) and every exclusion carries its
// reason in nccl_validation.cpp and in the table.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/core/plan.h"

namespace zerosim::nccl {

struct ValidationPoint {
  std::string curve;
  std::string preset;
  std::string setup;      // "8 GPUs / 1 node, NCCL 2.27, auto"
  CollectiveKind kind = CollectiveKind::AllReduce;
  int gpus = 0;
  long long bytes = 0;
  std::string metric;     // "time_us", "busbw_GBps", "busbw_per_nic_GBps"
  double measured = 0;
  double predicted = 0;
  double error = 0;       // (predicted - measured) / measured
  double bound = 0;       // asserted |error| bound; 0 = informational
  std::string chosen;     // NCCL's choice in the model, "ring/LL"
  std::string note;
  bool asserted() const { return bound > 0; }
  bool pass() const;
};

struct CurveStatus {
  std::string id;
  bool modelled = false;
  std::string preset;
  std::string reason;
};

struct ValidationReport {
  std::vector<ValidationPoint> points;
  std::vector<CurveStatus> curves;
  int asserted() const;
  int failed() const;
};

// One point the NCCL launch overhead (sim/fitted/fitted_constants.h, kNcclLaunchOverhead) is
// fitted on: a one-node all-reduce curve's measured time at `bytes` and zerosim's prediction in
// the setup validate_collectives() gives that curve, with the launch term off.
struct LaunchFitPoint {
  std::string curve, setup;
  long long bytes = 0;
  double measured_us = 0, model_us = 0;
};
// The two curves kNcclLaunchOverhead names (8x A100 nccl-tests, 8x H200 torch), in that order.
// InputError (key "validate.<curve id>") when `doc` lacks one of them or its point at `bytes`.
std::vector<LaunchFitPoint> launch_fit_points(const nlohmann::json& doc, long long bytes);

// Throws InputError (key "validate") when `doc` is not a list of curves.
ValidationReport validate_collectives(const nlohmann::json& doc);
std::string validation_markdown(const ValidationReport& report);
nlohmann::json validation_json(const ValidationReport& report);

}  // namespace zerosim::nccl
