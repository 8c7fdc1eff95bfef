#include "sim/cli/collective_command.h"

#include <boost/program_options.hpp>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/cluster/cluster.h"
#include "sim/cluster/topology.h"
#include "sim/collective/nccl_model.h"
#include "sim/collective/nccl_plan.h"
#include "sim/collective/nccl_validation.h"
#include "sim/core/error.h"
#include "sim/cli/parse_args.h"
#include "sim/input/json_input.h"
#include "sim/input/quantity.h"

namespace zerosim::cli {

namespace {

namespace po = boost::program_options;

using nlohmann::json;

std::string key(const std::string& flag) {
  std::string k = flag;
  while (!k.empty() && k[0] == '-') k.erase(0, 1);
  return "collective." + k;
}

std::vector<std::int32_t> parse_ranks(const std::string& spec, int num_gpus) {
  std::vector<std::int32_t> out;
  std::set<std::int32_t> seen;
  std::stringstream ss(spec);
  std::string tok;
  auto to_int = [&](const std::string& s) {
    std::size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != s.size() || s.empty() || v < 0) {
      throw InputError("collective.ranks", "'" + s + "' in '" + spec +
                                               "' is not a rank; expected e.g. 0-7, 0,8,16 or 0-63:8");
    }
    return v;
  };
  while (std::getline(ss, tok, ',')) {
    int step = 1;
    auto colon = tok.find(':');
    if (colon != std::string::npos) {
      step = to_int(tok.substr(colon + 1));
      tok = tok.substr(0, colon);
      if (step < 1) throw InputError("collective.ranks", "stride must be >= 1");
    }
    auto dash = tok.find('-');
    int a = to_int(dash == std::string::npos ? tok : tok.substr(0, dash));
    int b = dash == std::string::npos ? a : to_int(tok.substr(dash + 1));
    if (b < a) throw InputError("collective.ranks", "range '" + tok + "' goes backwards");
    for (int r = a; r <= b; r += step) {
      if (r >= num_gpus) {
        throw InputError("collective.ranks", "rank " + std::to_string(r) + " outside the " +
                                                 std::to_string(num_gpus) + " GPUs of the cluster");
      }
      if (!seen.insert(r).second) {
        throw InputError("collective.ranks", "rank " + std::to_string(r) + " appears twice");
      }
      out.push_back(r);
    }
  }
  if (out.empty()) throw InputError("collective.ranks", "no ranks in '" + spec + "'");
  return out;
}

void write_json(const json& j, const std::string& path) {
  if (path == "-") {
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::ofstream f(path);
  if (!f) throw InputError("collective.json", "cannot write '" + path + "'");
  f << j.dump(2) << "\n";
}


// The command line as given; values are checked (with their collective.<flag> key paths) when
// they are used.
struct CollectiveArgs {
  std::string cluster = "dgx-h100", nodes, gpus, ranks, op = "all_reduce", minbytes = "8",
              maxbytes = "128M", stepfactor = "2", algo, proto, nccl_version, cpu,
              oversubscription, nodes_per_leaf, json_out, validate;
  bool no_nvls = false, no_launch_overhead = false, no_pipeline = false, fabric = false,
       markdown = false, help = false;
};

po::options_description collective_options(CollectiveArgs& a) {
  po::options_description d(
      "usage: zerosim collective [options]\n"
      "  NCCL's choice and zerosim's predicted time, nccl-tests style, for one collective");
  d.add_options()
      ("cluster", po::value(&a.cluster), "cluster preset (default dgx-h100; see `zerosim list clusters`)")
      ("nodes", po::value(&a.nodes), "nodes (default 1)")
      ("gpus,g", po::value(&a.gpus), "the first N ranks (default: every GPU)")
      ("ranks", po::value(&a.ranks), "explicit ranks in ring order: \"0-7\", \"0,8,16\", \"0-63:8\"")
      ("op", po::value(&a.op), "all_reduce (default), all_gather, reduce_scatter, broadcast, "
                               "reduce, all_to_all, send_recv")
      ("minbytes,b", po::value(&a.minbytes), "smallest size (default 8)")
      ("maxbytes,e", po::value(&a.maxbytes),
       "largest size (default 128M); sizes take K/M/G (binary) or KiB..")
      ("stepfactor,f", po::value(&a.stepfactor), "multiply the size by F each step (default 2)")
      ("algo", po::value(&a.algo), "ring, tree, nvls, nvls_tree, pat or auto (NCCL_ALGO)")
      ("proto", po::value(&a.proto), "LL, LL128, Simple or auto (NCCL_PROTO)")
      ("nccl-version", po::value(&a.nccl_version), "tuning tables of another NCCL (default: the cluster's)")
      ("no-nvls", po::bool_switch(&a.no_nvls), "NCCL_NVLS_ENABLE=0")
      ("no-launch-overhead", po::bool_switch(&a.no_launch_overhead),
       "drop the per-call launch overhead (CUDA graphs)")
      ("no-pipeline", po::bool_switch(&a.no_pipeline), "drop zerosim's Ring/Simple slice latency term")
      ("cpu", po::value(&a.cpu), "intel|amd: host CPU vendor (NCCL's network overhead; default intel)")
      ("fabric", po::bool_switch(&a.fabric),
       "route the flows on the topology and apply the fabric factor")
      ("oversubscription", po::value(&a.oversubscription), "leaf oversubscription (implies --fabric)")
      ("nodes-per-leaf", po::value(&a.nodes_per_leaf),
       "nodes per scalable unit / rack (implies --fabric)")
      ("json", po::value(&a.json_out), "FILE|-: also write JSON (\"-\": JSON on stdout instead of the table)")
      ("validate", po::value(&a.validate), "compare with a collectives.json-format file instead")
      ("markdown", po::bool_switch(&a.markdown), "with --validate: print the markdown tables")
      ("help,h", po::bool_switch(&a.help), "this help");
  return d;
}

// Parse errors as InputError: an unknown option names the command, a bad value its flag.
void parse_collective_args(const std::vector<std::string>& args,
                           const po::options_description& d) {
  try {
    cli::parse(args, d, {});
  } catch (const po::unknown_option& e) {
    throw InputError("collective", std::string(e.what()) + " (see zerosim collective --help)");
  } catch (const po::error_with_option_name& e) {
    throw InputError(key(e.get_option_name()), e.what());
  } catch (const po::error& e) {
    throw InputError("collective", e.what());
  }
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

ClusterSpec collective_cluster(const CollectiveArgs& a) {
  json cj = {{"preset", a.cluster}};
  if (!a.nodes.empty()) {
    const double nodes = parse_quantity_text(a.nodes, Dimension::Count, "collective.nodes");
    if (nodes < 1 || nodes != static_cast<int>(nodes)) {
      throw InputError("collective.nodes", "must be a whole number >= 1");
    }
    cj["nodes"] = static_cast<int>(nodes);
  }
  return cluster_from_json(cj, "collective.cluster");
}

std::vector<std::int32_t> collective_ranks(const CollectiveArgs& a, const ClusterSpec& cluster) {
  if (!a.ranks.empty() && !a.gpus.empty()) {
    throw InputError("collective.ranks", "give --ranks or --gpus, not both");
  }
  if (!a.ranks.empty()) return parse_ranks(a.ranks, cluster.num_gpus());
  int n = cluster.num_gpus();
  if (!a.gpus.empty()) {
    const double g = parse_quantity_text(a.gpus, Dimension::Count, "collective.gpus");
    if (g < 1 || g > cluster.num_gpus() || g != static_cast<int>(g)) {
      throw InputError("collective.gpus", "must be a whole number from 1 to " +
                                              std::to_string(cluster.num_gpus()));
    }
    n = static_cast<int>(g);
  }
  std::vector<std::int32_t> ranks;
  for (int i = 0; i < n; ++i) ranks.push_back(i);
  return ranks;
}

nccl::ModelOptions model_options(const CollectiveArgs& a) {
  nccl::ModelOptions mo;
  if (!a.nccl_version.empty()) {
    nccl::version_from_string(a.nccl_version, "collective.nccl-version");  // validate
    mo.nccl_version = a.nccl_version;
  }
  if (!a.algo.empty() && a.algo != "auto") mo.algo = nccl::parse_algo(a.algo, "collective.algo");
  if (!a.proto.empty() && a.proto != "auto") {
    mo.proto = nccl::parse_proto(a.proto, "collective.proto");
  }
  if (!a.cpu.empty()) {
    if (a.cpu == "intel") mo.cpu = nccl::CpuVendor::Intel;
    else if (a.cpu == "amd") mo.cpu = nccl::CpuVendor::Amd;
    else throw InputError("collective.cpu", "expected intel or amd, got '" + a.cpu + "'");
  }
  mo.nvls_enable = !a.no_nvls;
  mo.launch_overhead = !a.no_launch_overhead;
  mo.pipeline_term = !a.no_pipeline;
  return mo;
}

std::optional<Topology> fabric_topology(const CollectiveArgs& a, const ClusterSpec& cluster) {
  if (!a.fabric && a.oversubscription.empty() && a.nodes_per_leaf.empty()) return std::nullopt;
  TopologyOptions to;
  if (!a.oversubscription.empty()) {
    to.oversubscription = parse_quantity_text(a.oversubscription, Dimension::Count,
                                              "collective.oversubscription");
    if (to.oversubscription < 1) throw InputError("collective.oversubscription", "must be >= 1");
  }
  if (!a.nodes_per_leaf.empty()) {
    const double p =
        parse_quantity_text(a.nodes_per_leaf, Dimension::Count, "collective.nodes-per-leaf");
    if (p < 1 || p != static_cast<int>(p)) {
      throw InputError("collective.nodes-per-leaf", "must be a whole number >= 1");
    }
    to.nodes_per_leaf = static_cast<int>(p);
  }
  return build_topology(cluster, to);
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

}  // namespace

int run_collective_command(const std::vector<std::string>& args) {
  CollectiveArgs a;
  const po::options_description options = collective_options(a);
  parse_collective_args(args, options);
  if (a.help) {
    std::cout << options;
    return 0;
  }
  if (!a.validate.empty()) return validate_against(a);

  const ClusterSpec cluster = collective_cluster(a);
  const std::vector<std::int32_t> ranks = collective_ranks(a, cluster);
  const CollectiveKind kind = nccl::parse_collective(a.op, "collective.op");
  if (kind == CollectiveKind::SendRecv && ranks.size() != 2) {
    throw InputError("collective.ranks", "send_recv needs exactly 2 ranks (e.g. --ranks 0,8)");
  }
  auto size_of = [](const std::string& text, const char* flag) {
    const double v = parse_quantity_text(text, Dimension::Bytes, key(flag));
    if (v < 1) throw InputError(key(flag), "must be at least 1 byte");
    return static_cast<Bytes>(v);
  };
  const Bytes minb = size_of(a.minbytes, "minbytes");
  const Bytes maxb = size_of(a.maxbytes, "maxbytes");
  if (maxb < minb) throw InputError("collective.maxbytes", "is smaller than --minbytes");
  const double factor =
      parse_quantity_text(a.stepfactor, Dimension::Count, "collective.stepfactor");
  if (!(factor > 1)) throw InputError("collective.stepfactor", "must be > 1");
  const nccl::ModelOptions mo = model_options(a);
  const nccl::NcclModel model(cluster, mo);
  const std::optional<Topology> topo = fabric_topology(a, cluster);

  json rows = json::array();
  const bool json_only = a.json_out == "-";
  if (!json_only) {
    std::printf("# zerosim collective: %s on %s x %d node%s, %zu ranks, NCCL %s tables%s\n",
                nccl::collective_cli_name(kind), a.cluster.c_str(), cluster.nodes,
                cluster.nodes > 1 ? "s" : "", ranks.size(),
                nccl::version_name(model.constants().version), topo ? ", fabric routed" : "");
    std::printf("#%13s %12s %10s %10s  %-10s %-8s %8s\n", "size(B)", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "algorithm", "protocol", "channels");
  }
  for (double b = static_cast<double>(minb); b <= static_cast<double>(maxb) * (1 + 1e-12);
       b *= factor) {
    const Bytes bytes = static_cast<Bytes>(b);
    const nccl::Prediction p = topo ? nccl::predict_on_topology(model, *topo, kind, bytes, ranks)
                                    : model.predict(kind, bytes, ranks);
    rows.push_back(prediction_row(bytes, p));
    if (!json_only) {
      std::printf("%14lld %12.2f %10.2f %10.2f  %-10s %-8s %8d\n", static_cast<long long>(bytes),
                  p.seconds * 1e6, p.algbw / 1e9, p.busbw / 1e9,
                  rows.back()["algorithm"].get<std::string>().c_str(),
                  rows.back()["protocol"].get<std::string>().c_str(), p.channels);
    }
  }
  if (!a.json_out.empty()) {
    json out = {{"command", "collective"},
                {"cluster", a.cluster},
                {"nodes", cluster.nodes},
                {"op", nccl::collective_cli_name(kind)},
                {"ranks", ranks},
                {"nccl_version", nccl::version_name(model.constants().version)},
                {"nccl_tag", model.constants().tag},
                {"launch_overhead", mo.launch_overhead},
                {"fabric", topo.has_value()},
                {"rows", rows}};
    write_json(out, a.json_out);
  }
  return 0;
}

}  // namespace zerosim::cli
