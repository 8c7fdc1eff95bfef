// `zerosim collective`: the flags parsed (collective_args.cpp), the prediction run for every
// row, and nccl-tests' table printed (its layout is sim/report/nccl_tests_table.cpp) or the JSON
// written; --validate compares the model with a measured file instead.
#include "sim/cli/collective_command.h"

#include <boost/program_options.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/cli/collective_args.h"
#include "sim/cluster/cluster.h"
#include "sim/cluster/topology.h"
#include "sim/collective/nccl_model.h"
#include "sim/collective/nccl_plan.h"
#include "sim/collective/nccl_tests.h"
#include "sim/collective/nccl_validation.h"
#include "sim/core/error.h"
#include "sim/core/output_file.h"
#include "sim/input/json_input.h"
#include "sim/report/nccl_tests_table.h"

namespace zerosim::cli {

namespace {

using namespace collective_detail;
using nlohmann::json;

void write_json(const json& j, const std::string& path) {
  write_output_file(path, j.dump(2) + "\n", "--json");
}

int validate_against(const CollectiveArgs& a) {
  const json doc = read_json_input_file(a.validate, "collective.validate",
                                        "cannot read '" + a.validate + "'");
  const nccl::ValidationReport report = nccl::validate_collectives(doc);
  if (!a.json_out.empty()) write_json(nccl::validation_json(report), a.json_out);
  if (a.json_out == "-") return 0;
  if (a.markdown) {
    std::cout << nccl::validation_markdown(report);
    return 0;
  }
  for (const auto& p : report.points) {
    std::printf("%-40s %-14s %12lld %-18s meas %10.2f pred %10.2f err %+6.1f%% %s\n",
                p.curve.c_str(), nccl::collective_cli_name(p.kind), p.bytes, p.metric.c_str(),
                p.measured, p.predicted, 100 * p.error,
                p.asserted() ? (p.pass() ? "ok" : "FAIL") : "shown");
  }
  std::printf("# %d asserted points, %d outside their bound\n", report.asserted(),
              report.failed());
  return 0;
}

json prediction_row(Bytes bytes, const nccl::Prediction& p) {
  return {{"bytes", bytes},
          {"time_us", p.seconds * 1e6},
          {"algbw_GBps", p.algbw / 1e9},
          {"busbw_GBps", p.busbw / 1e9},
          {"algorithm", p.p2p ? "p2p" : nccl::algo_name(p.algo)},
          {"protocol", nccl::proto_name(p.proto)},
          {"channels", p.channels},
          {"nccl_time_us", p.nccl_time_s * 1e6},
          {"launch_us", p.launch_s * 1e6},
          {"latency_us", p.latency_s * 1e6},
          {"pipeline_us", p.pipeline_s * 1e6},
          {"bandwidth_us", p.bandwidth_s * 1e6},
          {"fabric_factor", p.fabric_factor}};
}

// What produced the numbers, for the preamble: every choice the table depends on.
std::string model_lines(const CollectiveArgs& a, const nccl::NcclModel& model,
                        const std::optional<Topology>& topo, const std::string& nvls) {
  const nccl::ModelOptions& mo = model.options();
  const nccl::Constants& k = model.constants();
  std::ostringstream out;
  out << "# zerosim model: NCCL " << nccl::version_name(k.version) << " tuner (tables of " << k.tag
      << ") and zerosim's terms: ";
  if (mo.launch_overhead) {
    out << mo.launch_overhead_s * 1e6 << " us launch overhead per call";
  } else {
    out << "no launch overhead (" << (a.no_launch_overhead ? "--no-launch-overhead" : "-G") << ")";
  }
  out << (mo.pipeline_term ? ", Ring/Simple slice latency" : ", no slice latency (--no-pipeline)");
  if (topo) {
    out << "; flows routed on the " << a.cluster << " topology";
    if (!a.oversubscription.empty()) out << " (oversubscription " << a.oversubscription << ")";
    if (!a.nodes_per_leaf.empty()) out << " (" << a.nodes_per_leaf << " nodes per leaf)";
    out << ", fabric factor applied";
  } else {
    out << "; closed form, no fabric routing";
  }
  out << "\n# zerosim NCCL settings: NCCL_ALGO=" << (mo.algo ? nccl::algo_name(*mo.algo) : "auto")
      << " NCCL_PROTO=" << (mo.proto ? nccl::proto_name(*mo.proto) : "auto") << ", NVLS " << nvls
      << ", " << (mo.cpu == nccl::CpuVendor::Amd ? "AMD" : "Intel") << " host CPU\n";
  return out.str();
}

// Which calls NVLS may serve, for the preamble.
std::string nvls_note(const CollectiveRun& run) {
  const nccl::ModelOptions& mo = run.mo;
  const nccl::Constants& k = run.with_nvls.constants();
  const CollectiveKind kind = run.kind;
  const std::vector<nccl::DataType>& types = run.types;
  const std::vector<nccl::RedOp>& row_ops = run.row_ops;
  std::string nvls = mo.nvls_enable ? "allowed" : "off (--no-nvls)";
  if (mo.nvls_enable) {
    int refused = 0, total = 0;
    for (nccl::DataType t : types) {
      for (nccl::RedOp op : row_ops) {
        ++total;
        if (!nccl::nvls_supports(k, kind, op, t)) ++refused;
      }
    }
    if (refused == total) nvls = "off for this op and type (NCCL has no NVLS kernel for them)";
    else if (refused > 0) nvls = "allowed where NCCL has an NVLS kernel for the op and type";
  }
  return nvls;
}

// The measurement-only flags given: named once, they change nothing.
void warn_ignored(const std::vector<std::string>& ignored) {
  if (!ignored.empty()) {
    std::string list;
    for (const std::string& f : ignored) list += (list.empty() ? "" : ", ") + f;
    std::cerr << "zerosim: warning: collective: " << list
              << ": nccl-tests measurement settings, no effect on the prediction\n";
  }
}

// The `# zerosim` lines naming what produced the numbers, nccl-tests' own preamble line and
// the column headers.
void print_preamble(const CollectiveArgs& a, const po::variables_map& vm, const CollectiveRun& run) {
  const ClusterSpec& cluster = run.cluster;
  const RankLayout& layout = run.layout;
  const SizeSweep& sweep = run.sweep;
  const int n = static_cast<int>(layout.ranks.size());
  const char* binary = nccl::test_binary(run.kind);
  std::printf("# zerosim collective: predicted, not measured; nccl-tests %s layout (nccl-tests "
              "%s)\n",
              binary, a.nccl_tests_version.c_str());
  const std::string how =
      a.ranks.empty() ? "nprocs " + std::to_string(layout.nprocs) + " x nThread " +
                            std::to_string(layout.nthreads) + " x nGpus " +
                            std::to_string(layout.ngpus)
                      : "--ranks " + a.ranks;
  std::printf("# zerosim cluster: %s x %d node%s, %d ranks (%s)\n", a.cluster.c_str(),
              cluster.nodes, cluster.nodes > 1 ? "s" : "", n, how.c_str());
  std::fputs(model_lines(a, run.with_nvls, run.topo, nvls_note(run)).c_str(), stdout);
  // nccl-tests' own preamble line; "validation: 0" because nothing is checked.
  std::printf("# nThread %lld nGpus %lld minBytes %lld maxBytes %lld step: %lld(%s) warmup "
              "iters: %lld iters: %lld agg iters: %lld validation: %d graph: %lld\n",
              layout.nthreads, layout.ngpus, static_cast<long long>(sweep.minb),
              static_cast<long long>(sweep.maxb),
              sweep.factor > 1 ? sweep.factor : static_cast<long long>(sweep.step),
              sweep.factor > 1 ? "factor" : "bytes", measure_flag(vm, "warmup_iters", 1),
              measure_flag(vm, "iters", 20), measure_flag(vm, "agg_iters", 1), 0,
              whole_number(a.cudagraph, "collective.cudagraph", 0));
  std::printf("#\n");
  if (a.verbose) {
    std::printf("# zerosim columns after #wrong: NCCL's algorithm, protocol, channels\n");
  }
  std::fputs(report::nccl_tests_header(run.table).c_str(), stdout);
}

// One row per datatype, op, root and size: predicted, printed as nccl-tests prints it unless
// only JSON is asked for, and kept for the JSON; `avg_busbw` is their mean busbw.
json predict_rows(const CollectiveArgs& a, const CollectiveRun& run, bool json_only,
                  double& avg_busbw) {
  const nccl::Constants& k = run.with_nvls.constants();
  const CollectiveKind kind = run.kind;
  const std::vector<std::int32_t>& ranks = run.layout.ranks;
  const int n = static_cast<int>(ranks.size());
  const std::vector<Bytes>& sizes = run.sweep.sizes;
  const std::vector<nccl::DataType>& types = run.types;
  const std::vector<nccl::RedOp>& row_ops = run.row_ops;
  const std::vector<int>& roots = run.roots;
  const std::optional<Topology>& topo = run.topo;
  const nccl::NcclModel& with_nvls = run.with_nvls;
  const nccl::NcclModel& without_nvls = run.without_nvls;
  const report::NcclTestsLayout table = run.table;
  json rows = json::array();
  double busbw_sum = 0;
  for (nccl::DataType t : types) {
    for (nccl::RedOp op : row_ops) {
      const nccl::NcclModel& model = nccl::nvls_supports(k, kind, op, t) ? with_nvls : without_nvls;
      const char* op_name = nccl::test_has_op(kind) ? name_of(nccl::kRedOpNames, op) : "none";
      for (int root : roots) {
        for (Bytes size : sizes) {
          const nccl::TestSize ts = nccl::test_size(kind, size, t, n);
          const int at = root < 0 ? 0 : root;
          const nccl::Prediction p =
              topo ? nccl::predict_on_topology(model, *topo, kind, ts.bytes, ranks, at)
                   : model.predict(kind, ts.bytes, ranks);
          json row = prediction_row(ts.bytes, p);
          row["count"] = ts.count;
          row["type"] = name_of(nccl::kDataTypeNames, t);
          row["redop"] = op_name;
          row["root"] = root;
          busbw_sum += p.busbw / 1e9;
          if (!json_only) {
            const report::NcclTestsCell cell{p.seconds * 1e6, p.algbw / 1e9, p.busbw / 1e9};
            std::string line = report::nccl_tests_row(
                {ts.bytes, ts.count, name_of(nccl::kDataTypeNames, t), op_name, root, cell, cell},
                table);
            if (a.verbose) {
              const bool call = ts.bytes > 0;  // NCCL returns at once for a count of 0
              char extra[64];
              std::snprintf(extra, sizeof extra, "  %-9s  %-6s  %8s",
                            call ? row["algorithm"].get<std::string>().c_str() : "-",
                            call ? row["protocol"].get<std::string>().c_str() : "-",
                            call ? std::to_string(p.channels).c_str() : "-");
              line += extra;
            }
            std::printf("%s\n", line.c_str());
          }
          rows.push_back(std::move(row));
        }
      }
    }
  }
  // nccl-tests averages busbw over every out-of-place and in-place cell; both are the same here.
  avg_busbw = rows.empty() ? 0 : busbw_sum / static_cast<double>(rows.size());
  return rows;
}

// The --json document: what ran where, the model's choices and every row.
json collective_json(const CollectiveArgs& a, const CollectiveRun& run, const json& rows,
                     double avg_busbw) {
  const CollectiveKind kind = run.kind;
  const nccl::Constants& k = run.with_nvls.constants();
  const RankLayout& layout = run.layout;
  const std::vector<int>& roots = run.roots;
  const char* binary = nccl::test_binary(kind);
  return {{"command", "collective"},
          {"cluster", a.cluster},
          {"nodes", run.cluster.nodes},
          {"op", nccl::collective_cli_name(kind)},
          {"collective", nccl::collective_cli_name(kind)},
          {"nccl_tests_binary", binary},
          {"datatype", a.datatype},
          {"redop", nccl::test_has_op(kind) ? a.redop : "none"},
          {"root", roots.size() == 1 ? roots.front() : -1},
          {"nprocs", layout.nprocs},
          {"nthreads", layout.nthreads},
          {"ngpus", layout.ngpus},
          {"ranks", layout.ranks},
          {"nccl_version", nccl::version_name(k.version)},
          {"nccl_tag", k.tag},
          {"launch_overhead", run.mo.launch_overhead},
          {"fabric", run.topo.has_value()},
          {"avg_busbw_GBps", avg_busbw},
          {"rows", rows}};
}

}  // namespace

int run_collective_command(const std::vector<std::string>& args) {
  CollectiveArgs a;
  const po::options_description options = collective_options(a);
  const po::variables_map vm = parse_collective_args(args, options);
  if (a.help) {
    std::cout << options;
    return 0;
  }
  if (!a.validate.empty()) return validate_against(a);

  const CollectiveRun run = resolve_collective_run(a, vm);
  warn_ignored(run.ignored);
  const bool json_only = a.json_out == "-";
  if (!json_only) print_preamble(a, vm, run);
  double avg_busbw = 0;
  const json rows = predict_rows(a, run, json_only, avg_busbw);
  if (!json_only) {
    std::fputs(report::nccl_tests_footer(avg_busbw, nccl::test_binary(run.kind)).c_str(), stdout);
  }
  if (!a.json_out.empty()) write_json(collective_json(a, run, rows, avg_busbw), a.json_out);
  return 0;
}

}  // namespace zerosim::cli
