#include "sim/cli/parse_args.h"
#include "sim/cli/commands.h"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/output_file.h"
#include "sim/report/plan_export.h"
#include "sim/input/json_input.h"
#include "sim/report/calibrate_report.h"
#include "sim/report/published_report.h"
#include "sim/report/report.h"
#include "sim/run/bench.h"
#include "sim/scenario/keys.h"

namespace zerosim::cli {
namespace po = boost::program_options;
using json = nlohmann::json;

namespace {

// The scenario's command line: the input files and every shortcut flag of the binding table
// (sim/scenario/keys.cpp), merged by scenario_document().
struct ScenarioArgs {
  ScenarioInputs in;
  std::vector<bool*> switches;  // per table flag that is a switch, in scenario_flags() order
  std::unique_ptr<bool[]> switch_values;
};

po::options_description scenario_options(ScenarioArgs& a) {
  po::options_description d("scenario");
  const std::vector<BoundFlag> flags = scenario_flags();
  a.switch_values = std::make_unique<bool[]>(flags.size());
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const ScenarioFlag& f = *flags[i].flag;
    if (f.is_switch) {
      a.switch_values[i] = false;
      d.add_options()(f.name.c_str(), po::bool_switch(&a.switch_values[i]), f.help.c_str());
    } else {
      d.add_options()(f.name.c_str(), po::value<std::string>(), f.help.c_str());
    }
  }
  d.add_options()
      ("deepspeed", po::value(&a.in.deepspeed_file), "a DeepSpeed ds_config.json to read")
      ("calibration", po::value(&a.in.calibration_file),
       "a calibration.json from zerosim-validate bench (measured GEMM, HBM, Adam rates)")
      ("set", po::value(&a.in.sets)->composing(), "KEY=VALUE for any scenario key (repeatable)");
  return d;
}

// The flags the command line gave, as scenario_document() takes them.
ScenarioDocument scenario_document_of(ScenarioArgs& a, const po::variables_map& vm) {
  const std::vector<BoundFlag> flags = scenario_flags();
  for (std::size_t i = 0; i < flags.size(); ++i) {
    const ScenarioFlag& f = *flags[i].flag;
    if (f.is_switch) {
      if (a.switch_values[i]) a.in.flags.emplace_back(f.name, "true");
    } else if (vm.count(f.name)) {
      a.in.flags.emplace_back(f.name, vm[f.name].as<std::string>());
    }
  }
  return scenario_document(a.in);
}

}  // namespace

int cmd_simulate(const std::vector<std::string>& args, bool memory_only) {
  ScenarioArgs f;
  std::string json_out, trace_out, trace_ranks = "stages";
  bool fingerprint = false, help = false;
  po::options_description out("output");
  out.add_options()("json", po::value(&json_out), "write the JSON report to FILE (- = stdout)")(
      "help,h", po::bool_switch(&help), "this help");
  if (!memory_only) {
    out.add_options()("trace", po::value(&trace_out), "write a Chrome/Perfetto trace to FILE")(
        "trace-ranks", po::value(&trace_ranks)->default_value(trace_ranks),
        "ranks in the trace: stages (the first rank of each pipeline stage), all, or a list "
        "such as 0,8,16 or 0-7")(
        "fingerprint", po::bool_switch(&fingerprint), "print the trajectory fingerprint");
  }
  po::options_description all;
  all.add(scenario_options(f)).add(out);
  all.add_options()("scenario", po::value(&f.in.scenario_file), "scenario JSON file");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  const po::variables_map vm = parse(args, all, pos);
  if (help) {
    std::cout << "usage: zerosim " << (memory_only ? "memory" : "simulate")
              << " [SCENARIO.json] [flags]\n\n"
              << all;
    return 0;
  }
  Scenario s = resolve_scenario(scenario_document_of(f, vm));
  if (memory_only) {
    StepReport rep = memory_report(s);
    OutputFile json_file(json_out, "--json");
    if (json_out != "-") std::cout << report_text(s, rep, false);
    if (!json_out.empty()) {
      json_file.write(report_json(s, rep, false).dump(2) + "\n");
      json_file.commit();
    }
    return 0;
  }
  const TraceRankSpec trace_spec = parse_trace_ranks(trace_ranks, s.num_gpus());
  if (trace_out.empty() && !vm["trace-ranks"].defaulted()) {
    throw InputError("--trace-ranks", "selects the ranks of a trace; give --trace FILE too");
  }
  Simulation sim = simulate_step(s);
  OutputFile json_file(json_out, "--json"), trace_file(trace_out, "--trace");
  if (!json_out.empty()) {
    json j = report_json(s, sim.report, true);
    if (!sim.network.is_null()) j["network"] = sim.network;
    json_file.write(j.dump(2) + "\n");
  }
  TraceRanks traced;
  if (!trace_out.empty()) {
    traced = select_trace_ranks(sim, trace_spec, s.num_gpus());
    std::ostringstream trace;
    write_chrome_trace(trace, sim, traced);
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
  // On stderr, so that `--json -` keeps stdout a JSON document.
  if (!trace_out.empty()) {
    std::fflush(stdout);
    std::cerr << "zerosim: trace " << trace_out << " holds " << traced.summary << "\n";
  }
  return 0;
}

int cmd_plan(const std::vector<std::string>& args) {
  ScenarioArgs f;
  std::string out_file;
  int rank = -1;
  bool help = false;
  po::options_description all;
  all.add(scenario_options(f));
  all.add_options()("rank", po::value(&rank), "export only this rank (default: every rank)")(
      "out", po::value(&out_file), "write the plan JSON to FILE (- = stdout)")(
      "help,h", po::bool_switch(&help), "this help")(
      "scenario", po::value(&f.in.scenario_file), "scenario JSON file");
  po::positional_options_description pos;
  pos.add("scenario", 1);
  const po::variables_map vm = parse(args, all, pos);
  if (help) {
    std::cout << "usage: zerosim plan [SCENARIO.json] [flags] [--rank R] --out FILE\n\n" << all;
    return 0;
  }
  if (out_file.empty()) throw InputError("--out", "required: the file to write (- = stdout)");
  if (vm.count("rank") && rank < 0)
    throw InputError("--rank", "must be 0 or more, got " + std::to_string(rank) +
                                   " (leave --rank out for every rank)");
  ScenarioDocument doc = scenario_document_of(f, vm);
  // validate/ replays every rank on hardware, so the plan is unfolded unless asked otherwise.
  if (!json_path_find(doc.doc, "sim.ranks")) {
    json_path_create(doc.doc, "sim.ranks") = "all";
  }
  Scenario s = resolve_scenario(doc);
  Simulation sim = simulate_step(s);
  OutputFile out(out_file, "--out");
  out.write(export_plan(s, sim, rank).dump(1) + "\n");
  out.commit();
  return 0;
}

int cmd_validate_published(const std::vector<std::string>& args) {
  std::string cases_file, json_out, markdown_out, scenario_of;
  std::vector<std::string> settings;
  CaseSelection selection;
  std::string split;  // empty: not given
  int jobs = 0;
  bool help = false;
  po::options_description all("validate-published");
  all.add_options()("set", po::value(&settings)->composing(),
                    "KEY=VALUE applied to every case (e.g. sim.network=analytical)")(
      "jobs,j", po::value(&jobs), "cases simulated at once (default: the hardware's threads)")(
      "cases", po::value(&cases_file),
                    "a zerosim-published-cases/1 file (default: the bundled cases)")(
      "split", po::value(&split),
                    "calibration, evaluation or all: the cases of that set "
                    "(validate/cases/split.json); a set includes its large families (vtrain)")(
      "family", po::value(&selection.families)->composing(),
                    "only the cases of family F (repeatable), e.g. --family vtrain")(
      "json", po::value(&json_out), "write the results as JSON to FILE (- = stdout)")(
      "markdown", po::value(&markdown_out), "write the results as a markdown table to FILE")(
      "scenario-of", po::value(&scenario_of),
      "print the scenario document of the case with this id (with every --set applied) and "
      "simulate nothing: `zerosim simulate` or `memory` runs it, e.g. to see its breakdown")(
      "help,h", po::bool_switch(&help), "this help");
  parse(args, all, {});
  if (help) {
    std::cout << "usage: zerosim validate-published [--cases FILE] [--split SET] [--family F]... "
                 "[--json FILE] [--jobs N]\n\n"
                 "Without --cases, --split or --family: every bundled family but those the split "
                 "keeps out of the default run (vtrain, 1,549 runs).\n\n"
              << all;
    return 0;
  }
  if (jobs < 0) throw InputError("--jobs", "must be at least 1, got " + std::to_string(jobs));
  if (!scenario_of.empty()) {
    std::cout << case_scenario_of(
                     cases_file.empty() ? bundled_cases() : read_json_file(cases_file, "--cases"),
                     scenario_of, settings)
                     .dump(1)
              << "\n";
    return 0;
  }
  // The default run leaves out the bundled families too large to run every time; a file of
  // one's own runs whole.
  selection.default_run = cases_file.empty() && split.empty() && selection.families.empty();
  if (!split.empty()) selection.split = split;
  json doc = select_cases(
      cases_file.empty() ? bundled_cases() : read_json_file(cases_file, "--cases"), selection);
  PublishedSummary summary = validate_published(doc, settings, jobs);
  OutputFile json_file(json_out, "--json"), md_file(markdown_out, "--markdown");
  if (!json_out.empty()) json_file.write(published_json(summary).dump(2) + "\n");
  if (!markdown_out.empty()) md_file.write(published_markdown(summary));
  json_file.commit();
  md_file.commit();
  if (json_out != "-") std::cout << published_text(summary);
  return 0;
}

int cmd_calibrate(const std::vector<std::string>& args) {
  std::string json_out, grid = "0.70:0.95:0.01";
  CalibrateOptions opt;
  bool help = false;
  po::options_description all("calibrate");
  all.add_options()("jobs,j", po::value(&opt.jobs),
                    "cases simulated at once (default: the hardware's threads)")(
      "grid", po::value(&grid)->default_value(grid),
      "fitted.gemm_sustained values tried, LO:HI:STEP (two decimals at most)")(
      "with-vtrain", po::bool_switch(&opt.with_vtrain),
      "add both vtrain families (1,549 runs) to the report (the searches use "
      "vtrain-h2048 regardless)")(
      "json", po::value(&json_out), "write the results as JSON to FILE (- = stdout)")(
      "help,h", po::bool_switch(&help), "this help");
  parse(args, all, {});
  if (help) {
    std::cout << "usage: zerosim calibrate [--grid LO:HI:STEP] [--with-vtrain] [--json FILE] "
                 "[--jobs N]\n\n"
                 "Refits the constants of sim/fitted/fitted_constants.h by their stated methods, "
                 "each on its calibration family (validate/cases/split.json, analytical "
                 "network): fitted.gemm_sustained on megatron-sc21, "
                 "fitted.layer_host_op_time on vtrain-h2048; fitted.nccl_launch_overhead on "
                 "validate/measurements/collectives.json. Reports the calibration and evaluation "
                 "sets' error with every constant shipped and with every one refit. Changes "
                 "nothing.\n\n"
              << all;
    return 0;
  }
  // Every input is checked before the first simulation, so bad input prints nothing else.
  if (opt.jobs < 0) throw InputError("--jobs", "must be at least 1, got " + std::to_string(opt.jobs));
  opt.grid = parse_gemm_grid(grid);
  const CalibrateResult result = calibrate(opt);
  OutputFile json_file(json_out, "--json");
  if (!json_out.empty()) json_file.write(calibrate_json(result).dump(2) + "\n");
  json_file.commit();
  if (json_out != "-") std::cout << calibrate_text(result);
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
      char moe[96] = "";
      if (m.is_moe())
        std::snprintf(moe, sizeof moe, "  MoE %lld of %lld experts, %.2f B active",
                      static_cast<long long>(m.moe.top_k), static_cast<long long>(m.moe.num_experts),
                      count_params(m).active / 1e9);
      std::printf("%-16s %7.2f B params  %3lld layers  hidden %6lld  heads %3lld/%-3lld  %s%s%s\n",
                  name.c_str(), count_params(m).total / 1e9,
                  static_cast<long long>(m.num_layers), static_cast<long long>(m.hidden_size),
                  static_cast<long long>(m.num_attention_heads),
                  static_cast<long long>(m.num_kv_heads), to_string(m.mlp).c_str(),
                  m.is_mla() ? "  MLA" : "", moe);
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
  std::printf("%-6s %-7s %12s %10s %14s %12s %10s\n", "dp", "ranks", "events", "wall_s",
              "events/s", "step_s", "folded_s");
  run_engine_bench([](const BenchRow& r) {
    std::printf("%-6d %-7d %12llu %10.3f %14.0f %12.4f %10.4f\n", r.dp, r.ranks,
                static_cast<unsigned long long>(r.events), r.wall_s, r.events / r.wall_s,
                r.step_s, r.folded_wall_s);
    std::fflush(stdout);
  });
  return 0;
}

}  // namespace zerosim::cli
