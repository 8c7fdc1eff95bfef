#include "sim/explore/sweep.h"

#include <algorithm>
#include <set>

#include "sim/core/error.h"
#include "sim/explore/pool.h"
#include "sim/input/json_input.h"
#include "sim/run/simulate.h"
#include "sim/scenario/keys.h"
#include "sim/scenario/scenario.h"

namespace zerosim::explore {
using json = nlohmann::json;

namespace {

constexpr std::size_t kMaxPoints = 10'000'000;

std::string number(double v) { return json(v).dump(); }

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// A value as apply_setting reads it: JSON when it parses, else the text.
json value_json(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::parse_error&) {
    return text;
  }
}

// The step's overheads in seconds, in column order: each column's name and its field, declared
// once for the CSV, the JSON and the exchange of an MPI rank's rows.
struct TimeColumn {
  const char* name;
  double SweepRow::*field;
};
constexpr TimeColumn kTimeColumns[] = {
    {"exposed_dp_s", &SweepRow::exposed_dp_s}, {"exposed_tp_s", &SweepRow::exposed_tp_s},
    {"exposed_pp_s", &SweepRow::exposed_pp_s}, {"exposed_ep_s", &SweepRow::exposed_ep_s},
    {"exposed_cp_s", &SweepRow::exposed_cp_s}, {"bubble_s", &SweepRow::bubble_s},
    {"offload_s", &SweepRow::offload_s},       {"comm_overhead_s", &SweepRow::comm_overhead_s}};

}  // namespace

const std::vector<std::string>& sweep_metric_columns() {
  static const std::vector<std::string> cols = [] {
    std::vector<std::string> c = {"step_time_s",       "tokens_per_s", "tflops_per_gpu", "mfu",
                                  "peak_memory_bytes", "fits_in_memory"};
    for (const TimeColumn& t : kTimeColumns) c.push_back(t.name);
    for (const char* tail : {"host_memory_per_node_bytes", "fits_in_host_memory", "error"}) {
      c.push_back(tail);
    }
    return c;
  }();
  return cols;
}

std::vector<VariedKey> parse_vary(const std::vector<std::string>& flags) {
  std::vector<VariedKey> vary;
  std::set<std::string> seen;
  std::size_t points = 1;
  for (const auto& flag : flags) {
    const std::size_t eq = flag.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == flag.size()) {
      throw InputError("--vary", "expected KEY=V1,V2,... (e.g. zero.stage=1,2,3), got '" + flag + "'");
    }
    VariedKey v;
    v.key = flag.substr(0, eq);
    if (!seen.insert(v.key).second) throw InputError("--vary", "key '" + v.key + "' given twice");
    const std::string list = flag.substr(eq + 1);
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = list.find(',', start);
      std::string value = list.substr(start, comma == std::string::npos ? std::string::npos
                                                                          : comma - start);
      if (value.empty()) {
        throw InputError("--vary", "empty value in '" + flag + "'");
      }
      v.values.push_back(value);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    // The key must be one apply_setting accepts, and each value one the key's reader takes on
    // its own (its type and range: zero.stage=5 is bad input, not an infeasible point); what a
    // value makes of the other keys is checked per point.
    const KeySpec* spec = find_key(v.key);
    for (const auto& value : v.values) {
      json scratch = json::object();
      try {
        apply_setting(scratch, v.key + "=" + value);
        if (spec && spec->read) {
          Scenario alone;
          spec->read(*json_path_find(scratch, v.key), alone);
        }
      } catch (const InputError& e) {
        throw InputError("--vary", e.what());
      }
    }
    points *= v.values.size();
    if (points > kMaxPoints) {
      throw InputError("--vary", "more than " + std::to_string(kMaxPoints) + " points");
    }
    vary.push_back(std::move(v));
  }
  return vary;
}

json sweep_base_document(const std::string& scenario_file, const std::vector<std::string>& sets) {
  json doc = scenario_file.empty() ? default_scenario_document()
                                   : read_json_file(scenario_file, "scenario");
  if (!doc.is_object()) throw InputError("scenario", "a scenario must be a JSON object");
  for (const auto& s : sets) {
    try {
      apply_setting(doc, s);
    } catch (const InputError& e) {
      throw InputError("--set", e.what());
    }
  }
  return doc;
}

std::size_t point_count(const std::vector<VariedKey>& vary) {
  std::size_t n = 1;
  for (const auto& v : vary) n *= v.values.size();
  return n;
}

std::vector<std::string> point_values(const std::vector<VariedKey>& vary, std::size_t index) {
  std::vector<std::string> values(vary.size());
  for (std::size_t k = vary.size(); k-- > 0;) {
    const std::size_t n = vary[k].values.size();
    values[k] = vary[k].values[index % n];
    index /= n;
  }
  return values;
}

json point_document(const json& base, const std::vector<VariedKey>& vary, std::size_t index) {
  json doc = base;
  const std::vector<std::string> values = point_values(vary, index);
  std::set<std::string> keys;
  for (const auto& v : vary) keys.insert(v.key);
  auto sets = [&](const char* k) { return keys.count(k) != 0; };
  if (doc.contains("cluster") && doc["cluster"].is_object()) {
    if (sets("cluster.nodes") && !sets("cluster.num_gpus")) doc["cluster"].erase("num_gpus");
    if (sets("cluster.num_gpus") && !sets("cluster.nodes")) doc["cluster"].erase("nodes");
  }
  for (std::size_t k = 0; k < vary.size(); ++k) apply_setting(doc, vary[k].key + "=" + values[k]);
  const char* batch[] = {"training.gradient_accumulation_steps", "training.global_batch_size",
                         "training.micro_batch_size"};
  const bool any = sets(batch[0]) || sets(batch[1]) || sets(batch[2]);
  if (any && doc.contains("training") && doc["training"].is_object()) {
    json& t = doc["training"];
    const bool all_present = t.contains("gradient_accumulation_steps") &&
                             t.contains("global_batch_size") && t.contains("micro_batch_size");
    if (all_present) {
      for (const char* k : batch) {
        if (!sets(k)) {
          t.erase(std::string(k).substr(std::string("training.").size()));
          break;
        }
      }
    }
  }
  apply_setting(doc, "sim.allow_oom=true");
  return doc;
}

SweepRow evaluate_point(const json& base, const std::vector<VariedKey>& vary, std::size_t index) {
  SweepRow row;
  row.values = point_values(vary, index);
  try {
    const Scenario s = resolve_scenario(point_document(base, vary, index));
    const Simulation sim = simulate_step(s);
    const StepReport& r = sim.report;
    row.ok = true;
    row.step_time_s = r.step_time_s;
    row.tokens_per_s = r.tokens_per_s;
    row.tflops_per_gpu = r.tflops_per_gpu;
    row.mfu = r.mfu;
    row.peak_memory_bytes = r.memory.peak;
    row.fits_in_memory = r.fits_in_memory;
    row.exposed_dp_s = r.breakdown.exposed_by_group[0];
    row.exposed_tp_s = r.breakdown.exposed_by_group[1];
    row.exposed_pp_s = r.breakdown.exposed_by_group[2];
    row.exposed_ep_s = r.breakdown.exposed_by_group[3];
    row.exposed_cp_s = r.breakdown.exposed_by_group[4];
    row.bubble_s = r.breakdown.bubble_s;
    row.offload_s = r.breakdown.offload_s;
    row.comm_overhead_s = r.breakdown.comm_overhead_s;
    row.host_memory_per_node_bytes = r.host_memory_per_node;
    row.fits_in_host_memory = r.fits_in_host_memory;
  } catch (const InputError& e) {
    row = SweepRow{};
    row.values = point_values(vary, index);
    row.error = e.what();
  }
  return row;
}

std::vector<SweepRow> run_points(const json& base, const std::vector<VariedKey>& vary,
                                 const std::vector<std::size_t>& indices, int jobs,
                                 ProgressMode progress) {
  std::vector<SweepRow> rows(indices.size());
  Progress bar(indices.size(), "sweep", progress);
  parallel_for(
      indices.size(), jobs, [&](std::size_t i) { rows[i] = evaluate_point(base, vary, indices[i]); },
      bar.callback());
  bar.finish();
  return rows;
}

json rows_to_json(const std::vector<SweepRow>& rows) {
  json a = json::array();
  for (const auto& r : rows) {
    json m = {r.step_time_s, r.tokens_per_s, r.tflops_per_gpu, r.mfu};
    for (const TimeColumn& t : kTimeColumns) m.push_back(r.*t.field);
    a.push_back({{"values", r.values},
                 {"ok", r.ok},
                 {"m", std::move(m)},
                 {"peak", r.peak_memory_bytes},
                 {"fits", r.fits_in_memory},
                 {"host", r.host_memory_per_node_bytes},
                 {"fits_host", r.fits_in_host_memory},
                 {"error", r.error}});
  }
  return a;
}

std::vector<SweepRow> rows_from_json(const json& j) {
  std::vector<SweepRow> rows;
  for (const auto& e : j) {
    SweepRow r;
    r.values = e.at("values").get<std::vector<std::string>>();
    r.ok = e.at("ok").get<bool>();
    const auto& m = e.at("m");
    r.step_time_s = m.at(0).get<double>();
    r.tokens_per_s = m.at(1).get<double>();
    r.tflops_per_gpu = m.at(2).get<double>();
    r.mfu = m.at(3).get<double>();
    std::size_t i = 4;
    for (const TimeColumn& t : kTimeColumns) r.*t.field = m.at(i++).get<double>();
    r.peak_memory_bytes = e.at("peak").get<std::int64_t>();
    r.fits_in_memory = e.at("fits").get<bool>();
    r.host_memory_per_node_bytes = e.at("host").get<std::int64_t>();
    r.fits_in_host_memory = e.at("fits_host").get<bool>();
    r.error = e.at("error").get<std::string>();
    rows.push_back(std::move(r));
  }
  return rows;
}

std::string sweep_csv(const std::vector<VariedKey>& vary, const std::vector<SweepRow>& rows) {
  std::string out;
  bool first = true;
  auto field = [&](const std::string& s) {
    if (!first) out += ',';
    out += csv_field(s);
    first = false;
  };
  for (const auto& v : vary) field(v.key);
  for (const auto& c : sweep_metric_columns()) field(c);
  out += "\n";
  for (const auto& r : rows) {
    first = true;
    for (const auto& v : r.values) field(v);
    if (r.ok) {
      for (double x : {r.step_time_s, r.tokens_per_s, r.tflops_per_gpu, r.mfu}) field(number(x));
      field(std::to_string(r.peak_memory_bytes));
      field(r.fits_in_memory ? "true" : "false");
      for (const TimeColumn& t : kTimeColumns) field(number(r.*t.field));
      field(std::to_string(r.host_memory_per_node_bytes));
      field(r.fits_in_host_memory ? "true" : "false");
    } else {
      for (std::size_t i = 0; i + 1 < sweep_metric_columns().size(); ++i) field("");
    }
    field(r.error);
    out += "\n";
  }
  return out;
}

std::vector<InputWarning> sweep_warnings(const json& base, const std::vector<VariedKey>& vary) {
  const std::size_t tries = std::min<std::size_t>(point_count(vary), 16);
  for (std::size_t i = 0; i < tries; ++i) {
    try {
      return resolve_scenario(point_document(base, vary, i)).warnings;
    } catch (const InputError&) {
      // an infeasible point: the next one
    }
  }
  return {};
}

json sweep_json(const std::vector<VariedKey>& vary, const std::vector<SweepRow>& rows,
                const std::vector<InputWarning>& warnings) {
  json j = {{"format", "zerosim-sweep/1"}, {"vary", json::array()}, {"rows", json::array()}};
  j["warnings"] = json::array();
  for (const InputWarning& w : warnings)
    j["warnings"].push_back({{"key", w.key_path}, {"message", w.message}});
  for (const auto& v : vary) {
    json values = json::array();
    for (const auto& x : v.values) values.push_back(value_json(x));
    j["vary"].push_back({{"key", v.key}, {"values", values}});
  }
  for (const auto& r : rows) {
    json point = json::object();
    for (std::size_t k = 0; k < vary.size(); ++k) point[vary[k].key] = value_json(r.values[k]);
    json row = {{"point", point}};
    if (r.ok) {
      row["step_time_s"] = r.step_time_s;
      row["tokens_per_s"] = r.tokens_per_s;
      row["tflops_per_gpu"] = r.tflops_per_gpu;
      row["mfu"] = r.mfu;
      row["peak_memory_bytes"] = r.peak_memory_bytes;
      row["fits_in_memory"] = r.fits_in_memory;
      for (const TimeColumn& t : kTimeColumns) row[t.name] = r.*t.field;
      row["host_memory_per_node_bytes"] = r.host_memory_per_node_bytes;
      row["fits_in_host_memory"] = r.fits_in_host_memory;
    } else {
      for (std::size_t c = 0; c + 1 < sweep_metric_columns().size(); ++c) {
        row[sweep_metric_columns()[c]] = nullptr;
      }
    }
    row["error"] = r.error;
    j["rows"].push_back(std::move(row));
  }
  return j;
}

}  // namespace zerosim::explore
