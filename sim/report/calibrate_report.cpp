#include "sim/report/calibrate_report.h"

#include <cstdio>
#include <sstream>

#include "sim/fitted/fitted_constants.h"

namespace zerosim {

using json = nlohmann::json;

namespace {

json mape_or_null(double v, int n) { return n > 0 ? json(v) : json(nullptr); }

json error_json(const ErrorSummary& e) {
  return {{"cases", e.cases},
          {"skipped", e.skipped},
          {"time_mape_pct", mape_or_null(e.time_mape_pct, e.cases)},
          {"exact_cases", e.exact_cases},
          {"time_mape_exact_pct", mape_or_null(e.time_mape_exact_pct, e.exact_cases)}};
}

json run_json(const CalibrationRun& r) {
  json fams = json::object();
  for (const auto& [f, e] : r.evaluation_families) fams[f] = error_json(e);
  json values = json::object();
  for (const auto& [key, v] : r.values) values[key] = v;
  return {{"values", values},
          {"calibration", error_json(r.calibration)},
          {"evaluation", error_json(r.evaluation)},
          {"evaluation_families", fams}};
}

// "12.34" or "-" where no case has the figure.
std::string pct(double v, int n) {
  if (n == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// A constant's value as its key is written: a plain number, or microseconds for a time.
std::string value_text(const fitted::FittedConstant& c, double v) {
  char buf[32];
  if (c.plain_number()) {
    std::snprintf(buf, sizeof buf, "%.2f", v);
  } else {
    std::snprintf(buf, sizeof buf, "%gus", v * 1e6);
  }
  return buf;
}

}  // namespace

json calibrate_json(const CalibrateResult& r) {
  json refits = json::array();
  for (const ConstantRefit& c : r.refits) {
    json grid = json::array();
    for (const auto& [v, m] : c.grid) grid.push_back({{"value", v}, {"calibration_time_mape_pct", m}});
    refits.push_back({{"key", c.constant->key},
                      {"method", c.constant->method},
                      {"calibration_family", c.constant->calibration_family},
                      {"grid_spec", c.spec},
                      {"calibration_cases", c.calibration_cases},
                      {"grid", grid},
                      {"shipped", c.shipped},
                      {"refit", c.refit},
                      {"refit_equals_shipped", c.reproduces()}});
  }
  json points = json::array();
  for (const auto& p : r.launch.points) {
    points.push_back({{"curve", p.curve},
                      {"setup", p.setup},
                      {"bytes", p.bytes},
                      {"measured_us", p.measured_us},
                      {"model_without_launch_us", p.model_us},
                      {"difference_us", p.measured_us - p.model_us}});
  }
  return {{"settings", r.settings},
          {"refits", refits},
          {"at_shipped", run_json(r.at_shipped)},
          {"at_refit", run_json(r.at_refit)},
          {"nccl_launch_overhead",
           {{"key", fitted::kNcclLaunchOverhead.key},
            {"method", fitted::kNcclLaunchOverhead.method},
            {"points", points},
            {"mean_difference_us", r.launch.mean_us},
            {"rounding_us", r.launch.rounding_us},
            {"refit_s", r.launch.refit_s},
            {"shipped_s", r.launch.shipped_s},
            {"refit_equals_shipped", r.launch.reproduces()}}}};
}

std::string calibrate_text(const CalibrateResult& r) {
  std::ostringstream o;
  char line[512];
  o << "zerosim calibrate: the fitted constants of sim/fitted/fitted_constants.h refit by their "
       "stated methods\nsettings on every case:";
  for (const auto& s : r.settings) o << " " << s;
  o << "\n";
  for (const ConstantRefit& c : r.refits) {
    o << "\n" << c.constant->key << ": grid " << c.spec << ", step-time MAPE of family "
      << c.constant->calibration_family << " (" << c.calibration_cases
      << " cases), the other constants shipped\n";
    std::snprintf(line, sizeof line, "  %-8s %14s\n", "value", "calib_MAPE_%");
    o << line;
    for (const auto& [v, m] : c.grid) {
      std::snprintf(line, sizeof line, "  %-8s %14.4f%s\n", value_text(*c.constant, v).c_str(), m,
                    v == c.refit ? "  <- argmin" : "");
      o << line;
    }
    o << "  refit " << (c.reproduces() ? "equals" : "DIFFERS FROM") << " the shipped value\n";
  }
  std::snprintf(line, sizeof line, "\n  %-28s %14s %14s\n", "step-time MAPE % (cases)", "shipped",
                "refit");
  o << line;
  for (const ConstantRefit& c : r.refits) {
    const std::string key = c.constant->key;
    std::snprintf(line, sizeof line, "  %-28s %14s %14s\n", key.substr(key.find('.') + 1).c_str(),
                  value_text(*c.constant, c.shipped).c_str(),
                  value_text(*c.constant, c.refit).c_str());
    o << line;
  }
  const auto row = [&](const std::string& label, const ErrorSummary& a, const ErrorSummary& b,
                       bool exact) {
    const int n = exact ? a.exact_cases : a.cases;
    const std::string name = label + " (" + std::to_string(n) + ")";
    std::snprintf(line, sizeof line, "  %-28s %14s %14s\n", name.c_str(),
                  pct(exact ? a.time_mape_exact_pct : a.time_mape_pct, n).c_str(),
                  pct(exact ? b.time_mape_exact_pct : b.time_mape_pct,
                      exact ? b.exact_cases : b.cases)
                      .c_str());
    o << line;
  };
  row("calibration", r.at_shipped.calibration, r.at_refit.calibration, false);
  row("evaluation", r.at_shipped.evaluation, r.at_refit.evaluation, false);
  row("evaluation, exact", r.at_shipped.evaluation, r.at_refit.evaluation, true);
  for (std::size_t i = 0; i < r.at_shipped.evaluation_families.size(); ++i) {
    row("  " + r.at_shipped.evaluation_families[i].first,
        r.at_shipped.evaluation_families[i].second, r.at_refit.evaluation_families[i].second,
        false);
  }

  const LaunchRefit& l = r.launch;
  o << "\n" << fitted::kNcclLaunchOverhead.key
    << ": measured minus NCCL model (launch term off), one-node all_reduce\n";
  std::snprintf(line, sizeof line, "  %-38s %8s %12s %10s %9s\n", "curve", "bytes", "measured_us",
                "model_us", "diff_us");
  o << line;
  for (const auto& p : l.points) {
    std::snprintf(line, sizeof line, "  %-38s %8lld %12.2f %10.2f %9.2f\n", p.curve.c_str(),
                  p.bytes, p.measured_us, p.model_us, p.measured_us - p.model_us);
    o << line;
  }
  std::snprintf(line, sizeof line,
                "  mean %.2f us; rounded to the nearest %g us: refit %g us; shipped %g us\n",
                l.mean_us, l.rounding_us, l.refit_s * 1e6, l.shipped_s * 1e6);
  o << line;
  o << "  refit " << (l.reproduces() ? "equals" : "DIFFERS FROM") << " the shipped value\n";
  return o.str();
}

}  // namespace zerosim
