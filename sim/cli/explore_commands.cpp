#include "sim/cli/explore_commands.h"

#include "sim/cli/parse_args.h"

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "sim/core/error.h"
#include "sim/core/output_file.h"
#include "sim/explore/pool.h"
#include "sim/explore/search.h"
#include "sim/explore/sweep.h"
#include "sim/explore/sweep_mpi.h"

namespace zerosim::cli {
namespace po = boost::program_options;
using json = nlohmann::json;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int checked_jobs(int jobs) {
  if (jobs == 0) return default_jobs();
  if (jobs < 0) throw InputError("--jobs", "must be at least 1, got " + std::to_string(jobs));
  return jobs;
}

explore::ProgressMode progress_mode(bool forced) {
  return forced ? explore::ProgressMode::Always : explore::ProgressMode::Terminal;
}

constexpr const char* kProgressHelp =
    "show progress on stderr even when it is not a terminal (on a terminal it is shown anyway; "
    "stdout and output files are the same either way)";

// A degree flag: absent = 0 (free), else at least 1.
int degree(const po::variables_map& vm, const char* flag, int value) {
  if (!vm.count(flag)) return 0;
  if (value < 1) {
    throw InputError(std::string("--") + flag, "must be at least 1, got " + std::to_string(value));
  }
  return value;
}

}  // namespace

int cmd_sweep(const std::vector<std::string>& args) {
  std::string scenario_file, out_file;
  std::vector<std::string> vary_flags, sets;
  int jobs = 0;
  bool help = false, progress = false;
  po::options_description all("sweep");
  all.add_options()("vary", po::value(&vary_flags)->composing(),
                    "KEY=V1,V2,... a scenario key and its values (repeatable; the cross "
                    "product, the last --vary varying fastest)")(
      "set", po::value(&sets)->composing(), "KEY=VALUE for every point (repeatable)")(
      "jobs,j", po::value(&jobs), "threads (default: the hardware's)")(
      "out", po::value(&out_file), "FILE.csv or FILE.json (- = CSV on stdout)")(
      "progress", po::bool_switch(&progress), kProgressHelp)(
      "help,h", po::bool_switch(&help), "this help");
  po::options_description hidden;
  hidden.add_options()("scenario", po::value(&scenario_file), "scenario JSON file");
  po::options_description cmdline;
  cmdline.add(all).add(hidden);
  po::positional_options_description pos;
  pos.add("scenario", 1);
  parse(args, cmdline, pos);
  if (help) {
    std::cout << "usage: zerosim sweep [SCENARIO.json] --vary KEY=V1,V2,... [--vary ...] "
                 "[--set K=V ...] [--jobs N] [--progress] --out FILE.csv|FILE.json\n"
                 "Under `mpirun -np N` the points are split over the ranks; rank 0 writes.\n\n"
              << all;
    return 0;
  }
  if (out_file.empty()) throw InputError("--out", "required: FILE.csv or FILE.json (- = stdout)");
  const bool as_json = ends_with(out_file, ".json");
  if (!as_json && !ends_with(out_file, ".csv") && out_file != "-") {
    throw InputError("--out", "must end in .csv or .json, got '" + out_file + "'");
  }
  if (vary_flags.empty()) throw InputError("--vary", "required: at least one KEY=V1,V2,...");
  const std::vector<explore::VariedKey> vary = explore::parse_vary(vary_flags);
  const json base = explore::sweep_base_document(scenario_file, sets);
  jobs = checked_jobs(jobs);

  const auto t0 = std::chrono::steady_clock::now();
  explore::DistributedRows result =
      explore::run_sweep_distributed(base, vary, jobs, progress_mode(progress));
  if (result.rank != 0) return 0;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<InputWarning> warnings = explore::sweep_warnings(base, vary);
  // CSV has no place for them: standard error, as for JSON.
  for (const InputWarning& w : warnings)
    std::cerr << "zerosim: warning: " << w.key_path << ": " << w.message << "\n";
  const std::string text = as_json ? explore::sweep_json(vary, result.rows, warnings).dump(2) + "\n"
                                   : explore::sweep_csv(vary, result.rows);
  write_output_file(out_file, text, "--out");
  if (out_file != "-") {
    std::size_t failed = 0, oom = 0;
    for (const auto& r : result.rows) {
      if (!r.ok) ++failed;
      else if (!r.fits_in_memory) ++oom;
    }
    std::printf("sweep: %zu points (%zu infeasible, %zu do not fit) in %.2f s (%.1f points/s, "
                "%d rank%s x %d threads) -> %s\n",
                result.rows.size(), failed, oom, wall,
                wall > 0 ? static_cast<double>(result.rows.size()) / wall : 0.0, result.size,
                result.size == 1 ? "" : "s", jobs, out_file.c_str());
  }
  return 0;
}

int cmd_search(const std::vector<std::string>& args) {
  explore::SearchOptions o;
  std::string zero_list, json_out, headroom;
  long long gbs = 1024, seq_length = 0;
  int jobs = 0, tp = 0, pp = 0, max_tp = 0, max_pp = 0;
  bool help = false, progress = false;
  po::options_description all("search");
  all.add_options()("model", po::value(&o.model), "model preset or HF config.json path")(
      "cluster", po::value(&o.cluster), "cluster preset")(
      "nodes", po::value(&o.nodes), "number of nodes")(
      "gbs", po::value(&gbs), "global batch size in sequences (default 1024)")(
      "top", po::value(&o.top), "configurations to print, exactly as an exhaustive search would "
                                "rank them (default 10)")(
      "zero-stages", po::value(&zero_list), "ZeRO stages to try, e.g. 1,2 (default 0,1,2,3)")(
      "tp", po::value(&tp), "fix the tensor-parallel degree")(
      "pp", po::value(&pp), "fix the pipeline-parallel degree")(
      "max-tp", po::value(&max_tp), "try tensor-parallel degrees up to N (default: a node's GPUs)")(
      "max-pp", po::value(&max_pp), "try pipeline-parallel degrees up to N (default 16)")(
      "seq-length", po::value(&seq_length), "sequence length in tokens (sets model.seq_length)")(
      "memory-headroom", po::value(&headroom),
      "GPU memory a layout must leave free, e.g. 10% (a layout fits when its peak <= (1 - "
      "headroom) x the GPU's memory)")(
      "set", po::value(&o.sets)->composing(),
      "KEY=VALUE kept fixed for every candidate (repeatable; keys the search varies are refused)")(
      "exhaustive", po::bool_switch(&o.exhaustive),
      "simulate every layout in full instead of pruning by the analytical estimate (slow)")(
      "jobs,j", po::value(&jobs), "threads (default: the hardware's)")(
      "json", po::value(&json_out), "write the top configurations as JSON to FILE (- = stdout)")(
      "progress", po::bool_switch(&progress), kProgressHelp)(
      "help,h", po::bool_switch(&help), "this help");
  po::variables_map vm = parse(args, all, {});
  if (help) {
    std::cout << "usage: zerosim search --model M --cluster C --nodes N [--gbs B] [--top K] "
                 "[--tp N | --max-tp N] [--pp N | --max-pp N] [--zero-stages 0,1,2,3] "
                 "[--seq-length S] [--memory-headroom 10%] [--set K=V ...] [--json FILE]\n"
                 "Varies tp, pp (dp follows), virtual stages, ZeRO stage, micro-batch and "
                 "recomputation; every --set key is kept fixed. README.md#search says how the "
                 "layouts are screened and pruned.\n\n"
              << all;
    return 0;
  }
  if (!vm.count("nodes")) throw InputError("--nodes", "required: the number of nodes");
  o.global_batch_size = gbs;
  o.tp = degree(vm, "tp", tp);
  o.pp = degree(vm, "pp", pp);
  o.max_tp = degree(vm, "max-tp", max_tp);
  o.max_pp = degree(vm, "max-pp", max_pp);
  if (vm.count("seq-length")) {
    if (seq_length < 1) {
      throw InputError("--seq-length", "must be at least 1, got " + std::to_string(seq_length));
    }
    o.seq_length = seq_length;
  }
  if (vm.count("memory-headroom")) o.memory_headroom = explore::parse_headroom(headroom);
  if (!zero_list.empty()) {
    o.zero_stages.clear();
    std::size_t start = 0;
    for (;;) {
      const std::size_t comma = zero_list.find(',', start);
      const std::string item = zero_list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (item.size() != 1 || item[0] < '0' || item[0] > '3') {
        throw InputError("--zero-stages", "allowed: 0, 1, 2, 3 separated by commas; got '" + zero_list + "'");
      }
      o.zero_stages.push_back(item[0] - '0');
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  o.jobs = checked_jobs(jobs);
  o.progress = progress_mode(progress);
  const explore::SearchOutcome out = explore::run_search(o);
  if (!json_out.empty()) {
    write_output_file(json_out, explore::search_json(o, out).dump(2) + "\n", "--json");
  }
  if (json_out != "-") std::cout << explore::search_text(o, out);
  return 0;
}

}  // namespace zerosim::cli
