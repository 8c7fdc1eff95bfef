#include "sim/cli/parse_args.h"
#include "sim/cli/commands.h"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/report/plan_export.h"
#include "sim/report/published.h"
#include "sim/report/report.h"
#include "sim/scenario/scenario.h"

namespace zerosim::cli {
namespace po = boost::program_options;
using json = nlohmann::json;

namespace {

// Writes `text` to `path` ("-" = stdout) through a temporary file renamed into place, so a
// failure never leaves a partial output file.
class PendingOutput {
 public:
  PendingOutput(std::string path) : path_(std::move(path)) {}
  void write(const std::string& text) {
    if (path_ == "-") {
      std::cout << text;
      return;
    }
    tmp_ = path_ + ".tmp." + std::to_string(::getpid());
    std::ofstream out(tmp_, std::ios::binary);
    out << text;
    out.close();
    if (!out) {
      std::filesystem::remove(tmp_);
      throw InputError("--json/--trace", "cannot write '" + path_ + "'");
    }
  }
  void commit() {
    if (tmp_.empty()) return;
    std::error_code ec;
    std::filesystem::rename(tmp_, path_, ec);
    if (ec) {
      std::filesystem::remove(tmp_, ec);
      throw InputError("--json/--trace", "cannot write '" + path_ + "'");
    }
    tmp_.clear();
  }
  ~PendingOutput() {
    if (!tmp_.empty()) {
      std::error_code ec;
      std::filesystem::remove(tmp_, ec);
    }
  }

 private:
  std::string path_;
  std::string tmp_;
};

// Numeric flags start unset (kUnset) so that an explicit 0 reaches the scenario checks.
constexpr long long kUnset = -(1LL << 62);

struct ScenarioFlags {
  std::string scenario_file, model, cluster, deepspeed, calibration, precision, recompute,
      framework;
  long long nodes = kUnset, num_gpus = kUnset, zero = kUnset, tp = kUnset, pp = kUnset,
            dp = kUnset, mbs = kUnset, gbs = kUnset, gas = kUnset;
  std::vector<std::string> sets;
  bool allow_oom = false;
};

po::options_description scenario_options(ScenarioFlags& f) {
  po::options_description d("scenario");
  d.add_options()
      ("model", po::value(&f.model), "model preset, HF config.json path (sets model)")
      ("cluster", po::value(&f.cluster), "cluster preset (sets cluster.preset)")
      ("nodes", po::value(&f.nodes), "number of nodes (sets cluster.nodes)")
      ("num-gpus", po::value(&f.num_gpus), "number of GPUs (sets cluster.num_gpus)")
      ("zero", po::value(&f.zero), "ZeRO stage 0-3 (sets zero.stage)")
      ("mbs", po::value(&f.mbs), "micro-batch size (sets training.micro_batch_size)")
      ("gbs", po::value(&f.gbs), "global batch size (sets training.global_batch_size)")
      ("gas", po::value(&f.gas), "gradient accumulation steps")
      ("tp", po::value(&f.tp), "tensor-parallel degree (sets parallel.tp)")
      ("pp", po::value(&f.pp), "pipeline-parallel degree (sets parallel.pp)")
      ("dp", po::value(&f.dp), "data-parallel degree (sets parallel.dp; derived if absent)")
      ("precision", po::value(&f.precision), "bf16 or fp16 (sets training.precision)")
      ("recompute", po::value(&f.recompute), "none, selective or full (sets parallel.recompute)")
      ("framework", po::value(&f.framework), "deepspeed, megatron, fsdp or nanotron")
      ("deepspeed", po::value(&f.deepspeed), "a DeepSpeed ds_config.json to read")
      ("calibration", po::value(&f.calibration),
       "a calibration.json from zerosim-validate bench (measured GEMM, HBM, Adam rates)")
      ("set", po::value(&f.sets)->composing(), "KEY=VALUE for any scenario key (repeatable)")
      ("allow-oom", po::bool_switch(&f.allow_oom), "simulate even if the step does not fit");
  return d;
}

json scenario_document(const ScenarioFlags& f) {
  // Without a scenario file: the built-in default scenario when nothing names the workload;
  // once --model, --cluster or --deepspeed does, the registry's defaults (data parallel only)
  // under those flags, so that the flags describe the run instead of editing GPT-3's.
  json doc;
  if (!f.scenario_file.empty()) {
    doc = read_json_file(f.scenario_file, "scenario");
  } else if (f.model.empty() && f.cluster.empty() && f.deepspeed.empty()) {
    doc = default_scenario_document();
  } else {
    doc = json::object();
    for (const KeySpec& k : scenario_keys()) {
      if (k.path == "cluster") doc["cluster"] = k.default_value;  // flags edit its fields
    }
  }
  if (!doc.is_object()) throw InputError("scenario", "a scenario must be a JSON object");
  if (!f.deepspeed.empty()) {
    apply_deepspeed_config(doc, read_json_file(f.deepspeed, "--deepspeed"), f.deepspeed);
  }
  auto set = [&](const std::string& key, const json& value) {
    apply_setting(doc, key + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
  };
  if (!f.model.empty()) doc["model"] = f.model;
  if (!f.cluster.empty()) {
    json& c = doc["cluster"];
    if (!c.is_object()) c = json::object();
    // A different preset does not inherit the old preset's overrides.
    if (c.value("preset", std::string()) != f.cluster) {
      json fresh = {{"preset", f.cluster}};
      for (const char* k : {"nodes", "num_gpus"}) {
        if (c.contains(k)) fresh[k] = c[k];
      }
      c = fresh;
    }
  }
  if (f.nodes != kUnset) {
    if (doc["cluster"].is_object()) doc["cluster"].erase("num_gpus");
    set("cluster.nodes", f.nodes);
  }
  if (f.num_gpus != kUnset) {
    if (doc["cluster"].is_object()) doc["cluster"].erase("nodes");
    set("cluster.num_gpus", f.num_gpus);
  }
  if (f.zero != kUnset) set("zero.stage", f.zero);
  // Batch flags win over the document's batch keys: the accumulation steps (then the global
  // batch) that the flags did not give are dropped so that DeepSpeed's rule derives them anew.
  if (!f.calibration.empty()) {
    apply_calibration(doc, read_json_file(f.calibration, "--calibration"), f.calibration);
  }
  auto given = [](long long v) { return v != kUnset; };
  if (given(f.mbs) || given(f.gbs) || given(f.gas)) {
    json& t = doc["training"];
    if (t.is_object()) {
      if (!given(f.gas)) t.erase("gradient_accumulation_steps");
      if (given(f.gas) && !given(f.gbs)) t.erase("global_batch_size");
    }
  }
  if (given(f.mbs)) set("training.micro_batch_size", f.mbs);
  if (given(f.gbs)) set("training.global_batch_size", f.gbs);
  if (given(f.gas)) set("training.gradient_accumulation_steps", f.gas);
  if (given(f.tp)) set("parallel.tp", f.tp);
  if (given(f.pp)) set("parallel.pp", f.pp);
  if (given(f.dp)) set("parallel.dp", f.dp);
  if (!f.precision.empty()) set("training.precision", f.precision);
  if (!f.recompute.empty()) set("parallel.recompute", f.recompute);
  if (!f.framework.empty()) set("parallel.framework", f.framework);
  if (f.allow_oom) set("sim.allow_oom", true);
  for (const auto& s : f.sets) apply_setting(doc, s);
  return doc;
}

}  // namespace

int cmd_simulate(const std::vector<std::string>& args, bool memory_only) {
  ScenarioFlags f;
  std::string json_out, trace_out;
  bool fingerprint = false, help = false;
  po::options_description out("output");
  out.add_options()("json", po::value(&json_out), "write the JSON report to FILE (- = stdout)")(
      "help,h", po::bool_switch(&help), "this help");
  if (!memory_only) {
    out.add_options()("trace", po::value(&trace_out), "write a Chrome/Perfetto trace to FILE")(
        "fingerprint", po::bool_switch(&fingerprint), "print the trajectory fingerprint");
  }
  po::options_description all;
  all.add(scenario_options(f)).add(out);
  all.add_options()("scenario", po::value(&f.scenario_file), "scenario JSON file");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  parse(args, all, pos);
  if (help) {
    std::cout << "usage: zerosim " << (memory_only ? "memory" : "simulate")
              << " [SCENARIO.json] [flags]\n\n"
              << all;
    return 0;
  }
  Scenario s = resolve_scenario(scenario_document(f));
  if (memory_only) {
    StepReport rep = memory_report(s);
    PendingOutput json_file(json_out.empty() ? "" : json_out);
    if (json_out != "-") std::cout << report_text(s, rep, false);
    if (!json_out.empty()) {
      json_file.write(report_json(s, rep, false).dump(2) + "\n");
      json_file.commit();
    }
    return 0;
  }
  Simulation sim = simulate_step(s);
  PendingOutput json_file(json_out), trace_file(trace_out);
  if (!json_out.empty()) {
    json j = report_json(s, sim.report, true);
    if (!sim.network.is_null()) j["network"] = sim.network;
    json_file.write(j.dump(2) + "\n");
  }
  if (!trace_out.empty()) {
    std::ostringstream trace;
    write_chrome_trace(trace, sim);
    trace_file.write(trace.str());
  }
  json_file.commit();
  trace_file.commit();
  if (json_out != "-") {
    std::cout << report_text(s, sim.report, true);
    if (fingerprint) {
      std::printf("  fingerprint     %016llx\n",
                  static_cast<unsigned long long>(sim.report.fingerprint));
    }
  }
  return 0;
}

int cmd_plan(const std::vector<std::string>& args) {
  ScenarioFlags f;
  std::string out_file;
  int rank = -1;
  bool help = false;
  po::options_description all;
  all.add(scenario_options(f));
  all.add_options()("rank", po::value(&rank), "export only this rank (default: every rank)")(
      "out", po::value(&out_file), "write the plan JSON to FILE (- = stdout)")(
      "help,h", po::bool_switch(&help), "this help")(
      "scenario", po::value(&f.scenario_file), "scenario JSON file");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  parse(args, all, pos);
  if (help) {
    std::cout << "usage: zerosim plan [SCENARIO.json] [flags] [--rank R] --out FILE\n\n" << all;
    return 0;
  }
  if (out_file.empty()) throw InputError("--out", "required: the file to write (- = stdout)");
  if (rank < -1) throw InputError("--rank", "must be 0 or more");
  json doc = scenario_document(f);
  // validate/ replays every rank on hardware, so the plan is unfolded unless asked otherwise.
  if (!doc.contains("sim") || !doc["sim"].is_object() || !doc["sim"].contains("ranks")) {
    doc["sim"]["ranks"] = "all";
  }
  Scenario s = resolve_scenario(doc);
  Simulation sim = simulate_step(s);
  PendingOutput out(out_file);
  out.write(export_plan(s, sim, rank).dump(1) + "\n");
  out.commit();
  return 0;
}

int cmd_validate_published(const std::vector<std::string>& args) {
  std::string cases_file, json_out, markdown_out;
  std::vector<std::string> settings;
  int jobs = 0;
  bool help = false;
  po::options_description all("validate-published");
  all.add_options()("set", po::value(&settings)->composing(),
                    "KEY=VALUE applied to every case (e.g. sim.network=analytical)")(
      "jobs,j", po::value(&jobs), "cases simulated at once (default: the hardware's threads)")(
      "cases", po::value(&cases_file),
                    "a zerosim-published-cases/1 file (default: the bundled cases)")(
      "json", po::value(&json_out), "write the results as JSON to FILE (- = stdout)")(
      "markdown", po::value(&markdown_out), "write the results as a markdown table to FILE")(
      "help,h", po::bool_switch(&help), "this help");
  parse(args, all, {});
  if (help) {
    std::cout << "usage: zerosim validate-published [--cases FILE] [--json FILE] [--jobs N]\n\n"
              << all;
    return 0;
  }
  if (jobs < 0) throw InputError("--jobs", "must be at least 1, got " + std::to_string(jobs));
  json doc = cases_file.empty() ? bundled_cases() : read_json_file(cases_file, "--cases");
  PublishedSummary summary = validate_published(doc, settings, jobs);
  PendingOutput json_file(json_out), md_file(markdown_out);
  if (!json_out.empty()) json_file.write(published_json(summary).dump(2) + "\n");
  if (!markdown_out.empty()) md_file.write(published_markdown(summary));
  json_file.commit();
  md_file.commit();
  if (json_out != "-") std::cout << published_text(summary);
  return 0;
}

int cmd_list(const std::vector<std::string>& args) {
  const std::vector<std::string> kinds = {"models", "clusters", "keys"};
  if (args.size() != 1) {
    throw InputError("list", "expected one of " + join_list(kinds));
  }
  const std::string& what = args[0];
  if (what == "models") {
    for (const auto& name : model_preset_names()) {
      ModelSpec m = model_preset(name, "model");
      std::printf("%-14s %7.2f B params  %3lld layers  hidden %6lld  heads %3lld/%-3lld  %s\n",
                  name.c_str(), count_params(m).total / 1e9,
                  static_cast<long long>(m.num_layers), static_cast<long long>(m.hidden_size),
                  static_cast<long long>(m.num_attention_heads),
                  static_cast<long long>(m.num_kv_heads), to_string(m.mlp).c_str());
    }
  } else if (what == "clusters") {
    for (const auto& name : cluster_preset_names()) {
      ClusterSpec c = cluster_from_json(json{{"preset", name}}, "cluster");
      std::printf("%-20s %2d x %-16s %s\n", name.c_str(), c.gpus_per_node, c.gpu.name.c_str(),
                  c.description.c_str());
    }
  } else if (what == "keys") {
    for (const auto& k : scenario_keys()) {
      std::string def = k.default_value.is_null() ? "(derived)" : k.default_value.dump();
      std::printf("%-42s %-7s %-24s %s\n", k.path.c_str(), k.type.c_str(), def.c_str(),
                  k.help.c_str());
    }
  } else {
    throw InputError("list", "unknown list '" + what + "'" + did_you_mean(what, kinds) +
                                 "; allowed: " + join_list(kinds));
  }
  return 0;
}

int cmd_bench(const std::vector<std::string>& args) {
  if (!args.empty()) throw InputError("bench", "takes no arguments");
  // One scenario at growing data-parallel degree: Llama-2-7B, ZeRO-3, 2 micro-batches per GPU,
  // dgx-h100 nodes, every rank simulated (sim.ranks=all) so that the engine's speed shows; the
  // folded run of the same scenario simulates one replica. Wall time covers plan building, the
  // engine and the report. The analytical network, so that the engine's cost is what is timed
  // (the flow network has its own bench, flow_bench).
  std::printf("%-6s %-7s %12s %10s %14s %12s %10s\n", "dp", "ranks", "events", "wall_s",
              "events/s", "step_s", "folded_s");
  for (int dp : {8, 64, 512, 4096}) {
    json doc = {{"model", "llama2-7b"},
                {"cluster", {{"preset", "dgx-h100"}, {"nodes", dp / 8}}},
                {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2}}},
                {"zero", {{"stage", 3}}},
                {"sim", {{"ranks", "all"}, {"network", "analytical"}}}};
    auto timed = [](const json& d, Simulation& out) {
      Scenario s = resolve_scenario(d);
      auto t0 = std::chrono::steady_clock::now();
      out = simulate_step(s);
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    Simulation sim, folded;
    const double wall = timed(doc, sim);
    doc["sim"]["ranks"] = "folded";
    const double wall_folded = timed(doc, folded);
    std::printf("%-6d %-7d %12llu %10.3f %14.0f %12.4f %10.4f\n", dp, dp,
                static_cast<unsigned long long>(sim.report.events), wall,
                sim.report.events / wall, sim.report.step_time_s, wall_folded);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace zerosim::cli
