#include "sim/collective/collective_command.h"

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
#include "sim/core/quantity.h"

namespace zerosim {

namespace {

using nlohmann::json;

const char* kHelp =
    "usage: zerosim collective [options]\n"
    "  NCCL's choice and zerosim's predicted time, nccl-tests style, for one collective.\n"
    "\n"
    "  --cluster NAME          cluster preset (default dgx-h100; see `zerosim list clusters`)\n"
    "  --nodes N               nodes (default 1)\n"
    "  --gpus N, -g N          the first N ranks (default: every GPU)\n"
    "  --ranks SPEC            explicit ranks in ring order: \"0-7\", \"0,8,16\", \"0-63:8\"\n"
    "  --op OP                 all_reduce (default), all_gather, reduce_scatter, broadcast,\n"
    "                          reduce, all_to_all, send_recv\n"
    "  -b, --minbytes SIZE     smallest size (default 8)\n"
    "  -e, --maxbytes SIZE     largest size (default 128M); sizes take K/M/G (binary) or KiB..\n"
    "  -f, --stepfactor F      multiply the size by F each step (default 2)\n"
    "  --algo A                ring, tree, nvls, nvls_tree, pat or auto (NCCL_ALGO)\n"
    "  --proto P               LL, LL128, Simple or auto (NCCL_PROTO)\n"
    "  --nccl-version V        tuning tables of another NCCL (default: the cluster's)\n"
    "  --no-nvls               NCCL_NVLS_ENABLE=0\n"
    "  --no-launch-overhead    drop the per-call launch overhead (CUDA graphs)\n"
    "  --no-pipeline           drop zerosim's Ring/Simple slice latency term\n"
    "  --cpu intel|amd         host CPU vendor (NCCL's network overhead; default intel)\n"
    "  --fabric                route the flows on the topology and apply the fabric factor\n"
    "  --oversubscription R    leaf oversubscription (implies --fabric)\n"
    "  --nodes-per-leaf P      nodes per scalable unit / rack (implies --fabric)\n"
    "  --json FILE|-           also write JSON (\"-\": JSON on stdout instead of the table)\n"
    "  --validate FILE         compare with a collectives.json-format file instead\n"
    "  --markdown              with --validate: print the markdown tables\n";

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

}  // namespace

int run_collective_command(const std::vector<std::string>& args) {
  std::map<std::string, std::string> opt;
  std::set<std::string> flags;
  const std::set<std::string> with_value = {
      "--cluster", "--nodes", "--gpus", "--ranks", "--op", "--minbytes", "--maxbytes",
      "--stepfactor", "--algo", "--proto", "--nccl-version", "--cpu", "--oversubscription",
      "--nodes-per-leaf", "--json", "--validate"};
  const std::set<std::string> switches = {"--no-nvls", "--no-launch-overhead", "--no-pipeline",
                                          "--fabric", "--markdown", "--help"};
  const std::map<std::string, std::string> shorts = {
      {"-b", "--minbytes"}, {"-e", "--maxbytes"}, {"-f", "--stepfactor"}, {"-g", "--gpus"},
      {"-h", "--help"}};
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string a = args[i];
    std::string value;
    bool has_value = false;
    auto eq = a.find('=');
    if (a.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_value = true;
    }
    if (shorts.count(a)) a = shorts.at(a);
    if (switches.count(a)) {
      if (has_value) throw InputError(key(a), "takes no value");
      flags.insert(a);
    } else if (with_value.count(a)) {
      if (!has_value) {
        if (i + 1 >= args.size()) throw InputError(key(a), "needs a value");
        value = args[++i];
      }
      opt[a] = value;
    } else {
      std::vector<std::string> all(with_value.begin(), with_value.end());
      all.insert(all.end(), switches.begin(), switches.end());
      throw InputError("collective", "unknown option '" + a + "'" + did_you_mean(a, all) +
                                         " (see zerosim collective --help)");
    }
  }
  if (flags.count("--help")) {
    std::cout << kHelp;
    return 0;
  }

  if (opt.count("--validate")) {
    const std::string path = opt["--validate"];
    std::ifstream f(path);
    if (!f) throw InputError("collective.validate", "cannot read '" + path + "'");
    json doc;
    try {
      f >> doc;
    } catch (const json::exception& e) {
      throw InputError("collective.validate", "'" + path + "' is not JSON: " + e.what());
    }
    const nccl::ValidationReport report = nccl::validate_collectives(doc);
    if (opt.count("--json")) write_json(nccl::validation_json(report), opt["--json"]);
    if (opt.count("--json") && opt["--json"] == "-") return 0;
    if (flags.count("--markdown")) {
      std::cout << nccl::validation_markdown(report);
    } else {
      for (const auto& p : report.points) {
        std::printf("%-40s %-14s %12lld %-18s meas %10.2f pred %10.2f err %+6.1f%% %s\n",
                    p.curve.c_str(), nccl::collective_cli_name(p.kind), p.bytes, p.metric.c_str(),
                    p.measured, p.predicted, 100 * p.error,
                    p.asserted() ? (p.pass() ? "ok" : "FAIL") : "shown");
      }
      std::printf("# %d asserted points, %d outside their bound\n", report.asserted(),
                  report.failed());
    }
    return 0;
  }

  const std::string preset = opt.count("--cluster") ? opt["--cluster"] : "dgx-h100";
  json cj = {{"preset", preset}};
  if (opt.count("--nodes")) {
    const double nodes = parse_quantity_text(opt["--nodes"], Dimension::Count, "collective.nodes");
    if (nodes < 1 || nodes != static_cast<int>(nodes)) {
      throw InputError("collective.nodes", "must be a whole number >= 1");
    }
    cj["nodes"] = static_cast<int>(nodes);
  }
  const ClusterSpec cluster = cluster_from_json(cj, "collective.cluster");

  std::vector<std::int32_t> ranks;
  if (opt.count("--ranks") && opt.count("--gpus")) {
    throw InputError("collective.ranks", "give --ranks or --gpus, not both");
  }
  if (opt.count("--ranks")) {
    ranks = parse_ranks(opt["--ranks"], cluster.num_gpus());
  } else {
    int n = cluster.num_gpus();
    if (opt.count("--gpus")) {
      const double g = parse_quantity_text(opt["--gpus"], Dimension::Count, "collective.gpus");
      if (g < 1 || g > cluster.num_gpus() || g != static_cast<int>(g)) {
        throw InputError("collective.gpus", "must be a whole number from 1 to " +
                                                std::to_string(cluster.num_gpus()));
      }
      n = static_cast<int>(g);
    }
    for (int i = 0; i < n; ++i) ranks.push_back(i);
  }

  const CollectiveKind kind =
      nccl::parse_collective(opt.count("--op") ? opt["--op"] : "all_reduce", "collective.op");
  if (kind == CollectiveKind::SendRecv && ranks.size() != 2) {
    throw InputError("collective.ranks", "send_recv needs exactly 2 ranks (e.g. --ranks 0,8)");
  }
  auto size_of = [&](const char* flag, const char* def) {
    const double v = parse_quantity_text(opt.count(flag) ? opt[flag] : def, Dimension::Bytes, key(flag));
    if (v < 1) throw InputError(key(flag), "must be at least 1 byte");
    return static_cast<Bytes>(v);
  };
  const Bytes minb = size_of("--minbytes", "8");
  const Bytes maxb = size_of("--maxbytes", "128M");
  if (maxb < minb) throw InputError("collective.maxbytes", "is smaller than --minbytes");
  const double factor =
      parse_quantity_text(opt.count("--stepfactor") ? opt["--stepfactor"] : "2", Dimension::Count,
                          "collective.stepfactor");
  if (!(factor > 1)) throw InputError("collective.stepfactor", "must be > 1");

  nccl::ModelOptions mo;
  if (opt.count("--nccl-version")) {
    nccl::version_from_string(opt["--nccl-version"], "collective.nccl-version");  // validate
    mo.nccl_version = opt["--nccl-version"];
  }
  if (opt.count("--algo") && opt["--algo"] != "auto") {
    mo.algo = nccl::parse_algo(opt["--algo"], "collective.algo");
  }
  if (opt.count("--proto") && opt["--proto"] != "auto") {
    mo.proto = nccl::parse_proto(opt["--proto"], "collective.proto");
  }
  if (opt.count("--cpu")) {
    const std::string cpu = opt["--cpu"];
    if (cpu == "intel") mo.cpu = nccl::CpuVendor::Intel;
    else if (cpu == "amd") mo.cpu = nccl::CpuVendor::Amd;
    else throw InputError("collective.cpu", "expected intel or amd, got '" + cpu + "'");
  }
  mo.nvls_enable = !flags.count("--no-nvls");
  mo.launch_overhead = !flags.count("--no-launch-overhead");
  mo.pipeline_term = !flags.count("--no-pipeline");
  const nccl::NcclModel model(cluster, mo);

  std::optional<Topology> topo;
  const bool fabric = flags.count("--fabric") || opt.count("--oversubscription") ||
                      opt.count("--nodes-per-leaf");
  if (fabric) {
    TopologyOptions to;
    if (opt.count("--oversubscription")) {
      to.oversubscription = parse_quantity_text(opt["--oversubscription"], Dimension::Count,
                                                "collective.oversubscription");
      if (to.oversubscription < 1) {
        throw InputError("collective.oversubscription", "must be >= 1");
      }
    }
    if (opt.count("--nodes-per-leaf")) {
      const double p = parse_quantity_text(opt["--nodes-per-leaf"], Dimension::Count,
                                           "collective.nodes-per-leaf");
      if (p < 1 || p != static_cast<int>(p)) {
        throw InputError("collective.nodes-per-leaf", "must be a whole number >= 1");
      }
      to.nodes_per_leaf = static_cast<int>(p);
    }
    topo = build_topology(cluster, to);
  }

  json rows = json::array();
  const bool json_only = opt.count("--json") && opt["--json"] == "-";
  if (!json_only) {
    std::printf("# zerosim collective: %s on %s x %d node%s, %zu ranks, NCCL %s tables%s\n",
                nccl::collective_cli_name(kind), preset.c_str(), cluster.nodes,
                cluster.nodes > 1 ? "s" : "", ranks.size(),
                nccl::version_name(model.constants().version), fabric ? ", fabric routed" : "");
    std::printf("#%13s %12s %10s %10s  %-10s %-8s %8s\n", "size(B)", "time(us)", "algbw(GB/s)",
                "busbw(GB/s)", "algorithm", "protocol", "channels");
  }
  for (double b = static_cast<double>(minb); b <= static_cast<double>(maxb) * (1 + 1e-12);
       b *= factor) {
    const Bytes bytes = static_cast<Bytes>(b);
    const nccl::Prediction p = topo ? nccl::predict_on_topology(model, *topo, kind, bytes, ranks)
                                    : model.predict(kind, bytes, ranks);
    const std::string algo = p.p2p ? "p2p" : nccl::algo_name(p.algo);
    const std::string proto = nccl::proto_name(p.proto);
    rows.push_back({{"bytes", bytes},
                    {"time_us", p.seconds * 1e6},
                    {"algbw_GBps", p.algbw / 1e9},
                    {"busbw_GBps", p.busbw / 1e9},
                    {"algorithm", algo},
                    {"protocol", proto},
                    {"channels", p.channels},
                    {"nccl_time_us", p.nccl_time_s * 1e6},
                    {"launch_us", p.launch_s * 1e6},
                    {"latency_us", p.latency_s * 1e6},
                    {"pipeline_us", p.pipeline_s * 1e6},
                    {"bandwidth_us", p.bandwidth_s * 1e6},
                    {"fabric_factor", p.fabric_factor}});
    if (!json_only) {
      std::printf("%14lld %12.2f %10.2f %10.2f  %-10s %-8s %8d\n", static_cast<long long>(bytes),
                  p.seconds * 1e6, p.algbw / 1e9, p.busbw / 1e9, algo.c_str(), proto.c_str(),
                  p.channels);
    }
  }
  if (opt.count("--json")) {
    json out = {{"command", "collective"},
                {"cluster", preset},
                {"nodes", cluster.nodes},
                {"op", nccl::collective_cli_name(kind)},
                {"ranks", ranks},
                {"nccl_version", nccl::version_name(model.constants().version)},
                {"nccl_tag", model.constants().tag},
                {"launch_overhead", mo.launch_overhead},
                {"fabric", fabric},
                {"rows", rows}};
    write_json(out, opt["--json"]);
  }
  return 0;
}

}  // namespace zerosim
