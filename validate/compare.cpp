#include "validate/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <ostream>

namespace zerosim::validate {
namespace {

using json = nlohmann::json;

double num(const json& o, const char* key, const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || !it->is_number()) {
    throw CompareError(where + ": missing number '" + key + "'");
  }
  return it->get<double>();
}

std::string str(const json& o, const char* key) {
  auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : "";
}

CompareRow make_row(std::string label, double predicted, double measured) {
  CompareRow r;
  r.label = std::move(label);
  r.predicted_s = predicted;
  r.measured_s = measured;
  r.error_pct = error_pct(predicted, measured);
  return r;
}

std::string fmt_time(double s) {
  char buf[32];
  const double a = std::fabs(s);
  if (a >= 1) std::snprintf(buf, sizeof buf, "%.3f s", s);
  else if (a >= 1e-3) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  return buf;
}

std::string fmt_pct(const std::optional<double>& p) {
  if (!p) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", *p);
  return buf;
}

void print_rows(std::ostream& out, const std::vector<CompareRow>& rows, std::size_t limit,
                bool show_count) {
  char line[512];
  std::snprintf(line, sizeof line, "  %-48s %12s %12s %9s%s\n", "", "predicted", "measured", "error",
                show_count ? "  count" : "");
  out << line;
  for (std::size_t i = 0; i < rows.size() && i < limit; ++i) {
    const CompareRow& r = rows[i];
    std::string label = r.label.size() > 48 ? r.label.substr(0, 45) + "..." : r.label;
    if (show_count) {
      std::snprintf(line, sizeof line, "  %-48s %12s %12s %9s  %5d\n", label.c_str(),
                    fmt_time(r.predicted_s).c_str(), fmt_time(r.measured_s).c_str(),
                    fmt_pct(r.error_pct).c_str(), r.count);
    } else {
      std::snprintf(line, sizeof line, "  %-48s %12s %12s %9s\n", label.c_str(),
                    fmt_time(r.predicted_s).c_str(), fmt_time(r.measured_s).c_str(),
                    fmt_pct(r.error_pct).c_str());
    }
    out << line;
  }
}

json row_json(const CompareRow& r) {
  json j = {{"label", r.label},
            {"predicted_s", r.predicted_s},
            {"measured_s", r.measured_s},
            {"error_pct", r.error_pct ? json(*r.error_pct) : json(nullptr)},
            {"count", r.count}};
  if (r.rank >= 0) j["rank"] = r.rank;
  if (r.id >= 0) j["id"] = r.id;
  if (!r.kind.empty()) j["kind"] = r.kind;
  return j;
}

}  // namespace

double CompareRow::abs_error_s() const { return std::fabs(predicted_s - measured_s); }

std::optional<double> error_pct(double predicted, double measured) {
  if (!(measured > 0)) return std::nullopt;
  return (predicted - measured) / measured * 100.0;
}

CompareReport compare_replay(const json& replay, SortBy sort) {
  if (!replay.is_object() || str(replay, "format") != "zerosim-replay/1") {
    throw CompareError("not a \"zerosim-replay/1\" document (write one with zerosim-validate replay)");
  }
  CompareReport rep;
  rep.backend = str(replay, "backend");
  rep.device = str(replay, "device");
  auto ranks = replay.find("ranks");
  if (ranks == replay.end() || !ranks->is_array() || ranks->empty()) {
    throw CompareError("replay: 'ranks' must be a non-empty array");
  }
  std::map<std::string, CompareRow> classes;
  double step_p = 0, step_m = 0;
  for (std::size_t ri = 0; ri < ranks->size(); ++ri) {
    const json& rk = (*ranks)[ri];
    const std::string where = "ranks[" + std::to_string(ri) + "]";
    const int rank = static_cast<int>(num(rk, "rank", where));
    const double sp = num(rk, "step_predicted_s", where), sm = num(rk, "step_measured_s", where);
    CompareRow rs = make_row("rank " + std::to_string(rank), sp, sm);
    rs.rank = rank;
    rep.rank_steps.push_back(rs);
    step_p = std::max(step_p, sp);
    step_m = std::max(step_m, sm);
    auto ops = rk.find("ops");
    if (ops == rk.end() || !ops->is_array()) throw CompareError(where + ": missing 'ops'");
    for (std::size_t oi = 0; oi < ops->size(); ++oi) {
      const json& o = (*ops)[oi];
      const std::string ow = where + ".ops[" + std::to_string(oi) + "]";
      const std::string kind = str(o, "kind");
      if (kind == "alloc" || kind == "free") continue;
      const double p = num(o, "predicted_duration_s", ow), m = num(o, "measured_duration_s", ow);
      if (p <= 0 && m <= 0) continue;
      const int id = static_cast<int>(num(o, "id", ow));
      std::string label = "r";  // "r<rank> #<id> <name>"
      label.append(std::to_string(rank)).append(" #").append(std::to_string(id)).append(" ").append(str(o, "name"));
      CompareRow row = make_row(std::move(label), p, m);
      row.rank = rank;
      row.id = id;
      row.kind = kind;
      rep.ops.push_back(row);
      std::string cls = kind + ":";
      if (kind == "compute") cls += str(o, "work").empty() ? "other" : str(o, "work");
      else if (kind == "collective") cls += str(o, "collective");
      else cls += str(o, "stream");
      auto [it, fresh] = classes.try_emplace(cls, make_row(cls, 0, 0));
      it->second.predicted_s += p;
      it->second.measured_s += m;
      it->second.count = fresh ? 1 : it->second.count + 1;
      it->second.kind = kind;
    }
  }
  rep.step = make_row("step", step_p, step_m);
  for (auto& [k, row] : classes) {
    row.error_pct = error_pct(row.predicted_s, row.measured_s);
    rep.classes.push_back(row);
  }
  auto worse = [sort](const CompareRow& a, const CompareRow& b) {
    if (sort == SortBy::Percent) {
      const double ea = a.error_pct ? std::fabs(*a.error_pct) : INFINITY;
      const double eb = b.error_pct ? std::fabs(*b.error_pct) : INFINITY;
      if (ea != eb) return ea > eb;
    }
    if (a.abs_error_s() != b.abs_error_s()) return a.abs_error_s() > b.abs_error_s();
    return a.label < b.label;
  };
  std::sort(rep.ops.begin(), rep.ops.end(), worse);
  std::sort(rep.classes.begin(), rep.classes.end(), worse);
  return rep;
}

void print_compare(std::ostream& out, const CompareReport& r, int top_ops) {
  out << "zerosim-validate compare: " << r.backend << " on " << r.device << "\n";
  out << "error % = (predicted - measured) / measured\n\n";
  out << "step\n";
  std::vector<CompareRow> steps{r.step};
  steps.insert(steps.end(), r.rank_steps.begin(), r.rank_steps.end());
  print_rows(out, steps, steps.size(), false);
  out << "\nby class (summed over ops and ranks), worst first\n";
  print_rows(out, r.classes, r.classes.size(), true);
  out << "\nops, worst first (" << std::min<std::size_t>(r.ops.size(), static_cast<std::size_t>(std::max(top_ops, 0)))
      << " of " << r.ops.size() << ")\n";
  print_rows(out, r.ops, static_cast<std::size_t>(std::max(top_ops, 0)), false);
}

json compare_json(const CompareReport& r, int top_ops) {
  json steps = json::array(), classes = json::array(), ops = json::array();
  for (const auto& x : r.rank_steps) steps.push_back(row_json(x));
  for (const auto& x : r.classes) classes.push_back(row_json(x));
  for (std::size_t i = 0; i < r.ops.size() && static_cast<int>(i) < top_ops; ++i) ops.push_back(row_json(r.ops[i]));
  return {{"format", "zerosim-compare/1"},
          {"backend", r.backend},
          {"device", r.device},
          {"step", row_json(r.step)},
          {"rank_steps", steps},
          {"classes", classes},
          {"ops", ops},
          {"ops_total", r.ops.size()}};
}

}  // namespace zerosim::validate
