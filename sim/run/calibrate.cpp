#include "sim/run/calibrate.h"

#include <cmath>
#include <cstdio>

#include "sim/core/error.h"
#include "sim/fitted/fitted_constants.h"

namespace zerosim::embedded {
std::size_t measurements_count();
const char* measurements_name(std::size_t i);
std::string measurements_text(std::size_t i);
}  // namespace zerosim::embedded

namespace zerosim {
namespace {

using json = nlohmann::json;

// kNcclLaunchOverhead's fitted_on: the 32 KiB points.
constexpr long long kLaunchFitBytes = 32 * 1024;

// "0.85", "1", ".5" -> hundredths; -1 when `s` is not a decimal with at most two places.
int hundredths_of(const std::string& s) {
  const auto dot = s.find('.');
  const std::string whole = s.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : s.substr(dot + 1);
  if ((whole.empty() && frac.empty()) || whole.size() > 3 || frac.size() > 2) return -1;
  if (dot != std::string::npos && frac.empty()) return -1;
  for (char c : whole + frac) {
    if (c < '0' || c > '9') return -1;
  }
  int v = whole.empty() ? 0 : std::stoi(whole) * 100;
  if (!frac.empty()) v += std::stoi(frac) * (frac.size() == 1 ? 10 : 1);
  return v;
}

std::vector<std::string> with(std::vector<std::string> settings, const std::string& extra) {
  settings.push_back(extra);
  return settings;
}

// The summary of set or family `name` in validate_published's by_set / by_family.
const ErrorSummary& summary_of(const std::vector<std::pair<std::string, ErrorSummary>>& list,
                               const std::string& name) {
  for (const auto& [n, e] : list) {
    if (n == name) return e;
  }
  throw std::logic_error("validate_published reported no set or family " + name);
}

CalibrationRun summarize_run(std::vector<std::pair<std::string, double>> values,
                             const PublishedSummary& s) {
  CalibrationRun r;
  r.values = std::move(values);
  r.calibration = summary_of(s.by_set, "calibration");
  r.evaluation = summary_of(s.by_set, "evaluation");
  for (const auto& [fam, e] : s.by_family) {
    if (published_split().find(fam)->set == "evaluation") r.evaluation_families.emplace_back(fam, e);
  }
  return r;
}

std::string embedded_measurements(const std::string& name) {
  for (std::size_t i = 0; i < embedded::measurements_count(); ++i) {
    if (embedded::measurements_name(i) == name) return embedded::measurements_text(i);
  }
  throw std::logic_error("validate/measurements/" + name + ".json is not compiled in");
}

}  // namespace

std::vector<int> GemmGrid::hundredths() const {
  std::vector<int> out;
  for (int v = lo; v <= hi; v += step) out.push_back(v);
  return out;
}

GemmGrid parse_gemm_grid(const std::string& text) {
  const std::string allowed =
      "expected LO:HI:STEP, decimals with at most two places, 0.05 <= LO <= HI <= 1, STEP > 0 "
      "(e.g. 0.70:0.95:0.01), got '" + text + "'";
  const auto a = text.find(':');
  const auto b = a == std::string::npos ? a : text.find(':', a + 1);
  if (b == std::string::npos || text.find(':', b + 1) != std::string::npos) {
    throw InputError("--grid", allowed);
  }
  GemmGrid g;
  g.lo = hundredths_of(text.substr(0, a));
  g.hi = hundredths_of(text.substr(a + 1, b - a - 1));
  g.step = hundredths_of(text.substr(b + 1));
  if (g.lo < 5 || g.hi < g.lo || g.hi > 100 || g.step < 1) throw InputError("--grid", allowed);
  return g;
}

bool LaunchRefit::reproduces() const { return refit_s == shipped_s; }

const std::vector<std::string>& calibrate_settings() {
  static const std::vector<std::string> s = {"sim.network=analytical"};
  return s;
}

// A plain number's grid is in hundredths (gemm_sustained), a time's in microseconds.
std::string ConstantGrid::setting(int point) const {
  char buf[96];
  if (constant->plain_number()) {
    std::snprintf(buf, sizeof buf, "%s=%d.%02d", constant->key, point / 100, point % 100);
  } else {
    std::snprintf(buf, sizeof buf, "%s=%dus", constant->key, point);
  }
  return buf;
}

// The shortest text that reads back as `value` exactly (the shipped value need not be on the
// grid): a plain number, or seconds for a time.
std::string ConstantGrid::setting(double value) const {
  char buf[96];
  std::snprintf(buf, sizeof buf, constant->plain_number() ? "%s=%.17g" : "%s=%.17gs",
                constant->key, value);
  return buf;
}

ConstantGrid gemm_sustained_grid(const GemmGrid& g) {
  char spec[64];
  std::snprintf(spec, sizeof spec, "%d.%02d:%d.%02d:%d.%02d", g.lo / 100, g.lo % 100, g.hi / 100,
                g.hi % 100, g.step / 100, g.step % 100);
  return {&fitted::kGemmSustained, g.hundredths(), 100, spec};
}

ConstantGrid layer_host_op_time_grid() {
  std::vector<int> us;
  for (int v = 6; v <= 18; ++v) us.push_back(v);
  return {&fitted::kLayerHostOpTime, us, 1e6, "6us:18us:1us"};
}

ConstantRefit search_constant(const json& cases_doc, const ConstantGrid& grid, int jobs) {
  ConstantRefit out;
  out.constant = grid.constant;
  out.spec = grid.spec;
  out.shipped = grid.constant->value;
  const std::string family = grid.constant->calibration_family;
  // The fit sees its calibration family only (split.json's rule).
  CaseSelection cal;
  cal.split = "calibration";
  cal.families = {family};
  const json cal_doc = select_cases(cases_doc, cal);
  int best = 0;
  double best_mape = -1;
  for (int p : grid.points) {
    const PublishedSummary s =
        validate_published(cal_doc, with(calibrate_settings(), grid.setting(p)), jobs);
    const ErrorSummary& e = summary_of(s.by_family, family);
    out.calibration_cases = e.cases;
    out.grid.emplace_back(p / grid.per_unit, e.time_mape_pct);
    // Strictly smaller: the grid ascends, so a tie keeps the smaller value.
    if (best_mape < 0 || e.time_mape_pct < best_mape) {
      best = p;
      best_mape = e.time_mape_pct;
    }
  }
  out.refit = best / grid.per_unit;
  return out;
}

bool CalibrateResult::reproduces() const {
  for (const ConstantRefit& r : refits) {
    if (!r.reproduces()) return false;
  }
  return true;
}

CalibrateResult refit_constants(const json& cases_doc, const CalibrateOptions& opt) {
  CalibrateResult out;
  out.settings = calibrate_settings();
  const std::vector<ConstantGrid> grids = {gemm_sustained_grid(opt.grid),
                                           layer_host_op_time_grid()};
  for (const ConstantGrid& g : grids) out.refits.push_back(search_constant(cases_doc, g, opt.jobs));
  // Calibration and evaluation together, every constant at one end; vtrain only when asked.
  CaseSelection every;
  every.default_run = !opt.with_vtrain;
  const json all_doc = select_cases(cases_doc, every);
  const auto run_at = [&](bool refit) {
    std::vector<std::string> settings = calibrate_settings();
    std::vector<std::pair<std::string, double>> values;
    for (std::size_t i = 0; i < grids.size(); ++i) {
      const double v = refit ? out.refits[i].refit : out.refits[i].shipped;
      settings.push_back(grids[i].setting(v));
      values.emplace_back(grids[i].constant->key, v);
    }
    return summarize_run(values, validate_published(all_doc, settings, opt.jobs));
  };
  out.at_shipped = run_at(false);
  out.at_refit = out.reproduces() ? out.at_shipped : run_at(true);
  return out;
}

LaunchRefit refit_nccl_launch(const json& collectives_doc) {
  LaunchRefit out;
  out.shipped_s = fitted::kNcclLaunchOverhead.value;
  out.points = nccl::launch_fit_points(collectives_doc, kLaunchFitBytes);
  double sum = 0;
  for (const auto& p : out.points) sum += p.measured_us - p.model_us;
  out.mean_us = sum / static_cast<double>(out.points.size());
  // Whole multiples of 5 us: the precision the constant is declared at (26.2 us -> 25 us).
  out.refit_s = std::round(out.mean_us / out.rounding_us) * out.rounding_us / 1e6;
  return out;
}

const json& bundled_collectives() {
  static const json doc = json::parse(embedded_measurements("collectives"));
  return doc;
}

CalibrateResult calibrate(const CalibrateOptions& opt) {
  CalibrateResult r = refit_constants(bundled_cases(), opt);
  r.launch = refit_nccl_launch(bundled_collectives());
  return r;
}

}  // namespace zerosim
