// The `zerosim collective` command line: the flags as nccl-tests takes them, checked and mapped
// onto the cluster, ranks, sizes and NCCL model options of one prediction.
#include "sim/cli/collective_args.h"

#include <algorithm>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/cli/parse_args.h"
#include "sim/core/error.h"
#include "sim/input/quantity.h"

namespace zerosim::cli::collective_detail {

namespace {

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

// nccl-tests' flags that set how a real run measures (or registers, or which kernels it runs:
// things zerosim does not model). Accepted so that a command line carries over unchanged, echoed
// where nccl-tests echoes them, and named in one warning: they never change the prediction.
struct MeasureFlag {
  const char* name;  // nccl-tests' long option, "name,c" for Boost
  const char* arg;
  const char* help;
};
constexpr MeasureFlag kMeasureFlags[] = {
    {"iters,n", "N", "timed iterations (default 20)"},
    {"warmup_iters,w", "N", "untimed warm-up iterations (default 1)"},
    {"agg_iters,m", "N", "operations grouped per iteration (default 1)"},
    {"run_cycles,N", "N", "times the sweep is run and printed (default 1)"},
    {"parallel_init,p", "0/1", "threads initialise NCCL concurrently"},
    {"check,c", "N", "iterations checked for correctness; zerosim checks nothing, #wrong is N/A"},
    {"blocking,z", "0-3", "wait (and barrier) after each operation"},
    {"stream_null,y", "0/1", "run on the default stream"},
    {"timeout,T", "S", "time limit of each test"},
    {"report_cputime,C", "0/1", "report CPU time instead of latency"},
    {"report_timestamps,S", "0/1", "timestamp column"},
    {"output_file,J", "FILE", "nccl-tests' JSON file (zerosim's JSON: --json)"},
    {"average,a", "0-3", "how the ranks' times combine (rank 0, mean, min, max)"},
    {"local_register,R", "0-2", "buffer registration (not modelled)"},
    {"cta_policy,x", "0-2", "NCCL's CTA policy (not modelled)"},
    {"device_implementation,D", "N", "nccl-tests' own device-API kernels (not modelled)"},
    {"device_cta_count,V", "N", "CTAs of those kernels"},
    {"memory,M", "0/1", "memory usage report"},
    {"unalign,u", "N", "misaligned buffers"},
    {"per_iter_timing,I", "0/1", "per-iteration timing columns"},
    {"per_iter_skip,K", "N", "iterations left out of -I's summary"},
};

std::string long_name(const char* name) {
  const std::string n = name;
  return n.substr(0, n.find(','));
}

std::string label(const char* name) {
  const std::string n = name;
  const auto comma = n.find(',');
  return comma == std::string::npos ? "--" + n : std::string{'-', n[comma + 1]};
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

RankLayout collective_ranks(const CollectiveArgs& a, const ClusterSpec& cluster) {
  RankLayout l;
  const bool launch = !a.nprocs.empty() || !a.nthreads.empty() || !a.ngpus.empty();
  if (!a.ranks.empty()) {
    if (launch) throw InputError("collective.ranks", "give --ranks or --nprocs/-t/-g, not both");
    l.ranks = parse_ranks(a.ranks, cluster.num_gpus());
    l.ngpus = static_cast<long long>(l.ranks.size());
    return l;
  }
  int n = cluster.num_gpus();
  if (launch) {
    // nccl-tests: ranks = MPI processes x threads per process x GPUs per thread.
    if (!a.nprocs.empty()) l.nprocs = whole_number(a.nprocs, "collective.nprocs", 1);
    if (!a.nthreads.empty()) l.nthreads = whole_number(a.nthreads, "collective.nthreads", 1);
    if (!a.ngpus.empty()) l.ngpus = whole_number(a.ngpus, "collective.ngpus", 1);
    const long long want = l.nprocs * l.nthreads * l.ngpus;
    if (want > cluster.num_gpus()) {
      const std::string k = !a.ngpus.empty() ? "collective.ngpus"
                            : !a.nthreads.empty() ? "collective.nthreads"
                                                  : "collective.nprocs";
      throw InputError(k, "nprocs x nthreads x ngpus = " + std::to_string(l.nprocs) + " x " +
                              std::to_string(l.nthreads) + " x " + std::to_string(l.ngpus) +
                              " = " + std::to_string(want) + " GPUs; the cluster has " +
                              std::to_string(cluster.num_gpus()) + " (see --nodes)");
    }
    n = static_cast<int>(want);
  } else {
    // Every GPU: one process per node driving all of that node's GPUs.
    l.nprocs = cluster.nodes;
    l.ngpus = cluster.gpus_per_node;
  }
  for (int i = 0; i < n; ++i) l.ranks.push_back(i);
  return l;
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
  // A captured graph replays the calls without their host-side launch (nccl-tests -G).
  const bool graphed = whole_number(a.cudagraph, "collective.cudagraph", 0) > 0;
  mo.launch_overhead = !a.no_launch_overhead && !graphed;
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

CollectiveKind parse_collective_flag(const std::string& text) {
  // nccl-tests names the collective by its binary: accept all_reduce_perf as well.
  std::string t = text;
  const std::string suffix = "_perf";
  if (t.size() > suffix.size() && t.compare(t.size() - suffix.size(), suffix.size(), suffix) == 0) {
    t.erase(t.size() - suffix.size());
  }
  return nccl::parse_collective(t, "collective.collective");
}

// -o: nccl-tests' reduction op. Before nccl-tests compatibility --op named the collective, so a
// collective there gets told where it went.
std::vector<nccl::RedOp> parse_redops(const std::string& text) {
  if (text == "all") return nccl::all_ops();
  if (auto op = value_of(nccl::kRedOpNames, text)) return {*op};
  std::optional<CollectiveKind> kind;
  try {
    kind = nccl::parse_collective(text, "collective.op");
  } catch (const InputError&) {
  }
  if (kind) {
    throw InputError("collective.op", "'" + text +
                                          "' is a collective; -o/--op is nccl-tests' reduction "
                                          "op (sum, prod, max, min, avg, mulsum or all). Choose "
                                          "the collective with --collective " +
                                          nccl::collective_cli_name(*kind));
  }
  auto names = names_of(nccl::kRedOpNames);
  names.push_back("all");
  throw InputError("collective.op", "unknown reduction op '" + text + "'" +
                                        did_you_mean(text, names) +
                                        "; expected one of: " + join_list(names));
}

std::vector<nccl::DataType> parse_datatypes(const std::string& text, const nccl::Constants& k) {
  if (text == "all") return nccl::all_types(k);
  auto names = names_of(nccl::kDataTypeNames);
  names.push_back("all");
  const auto t = value_of(nccl::kDataTypeNames, text);
  if (!t) {
    throw InputError("collective.datatype", "unknown datatype '" + text + "'" +
                                                did_you_mean(text, names) +
                                                "; expected one of: " + join_list(names));
  }
  const auto avail = nccl::all_types(k);
  if (std::find(avail.begin(), avail.end(), *t) == avail.end()) {
    throw InputError("collective.datatype",
                     "'" + text + "' needs NCCL 2.24 or later; these are NCCL " +
                         nccl::version_name(k.version) + "'s tables (see --nccl-version)");
  }
  return {*t};
}

// The roots a broadcast or reduce runs from (-r -1: each in turn); -1 for the others.
std::vector<int> parse_roots(const std::string& text, CollectiveKind kind, int n_ranks) {
  if (text == "all") {
    // nccl-tests' README offers "-r all", but its binary reads it with strtol, as root 0.
    throw InputError("collective.root", "'all' is read as 0 by nccl-tests; give -1 for every "
                                        "root in turn, as nccl-tests does");
  }
  const long long r = whole_number(text, "collective.root", -1);
  if (!nccl::test_has_root(kind)) return {-1};
  if (r >= n_ranks) {
    throw InputError("collective.root", "root " + std::to_string(r) + " outside the " +
                                            std::to_string(n_ranks) + " ranks");
  }
  if (r >= 0) return {static_cast<int>(r)};
  std::vector<int> all(n_ranks);
  for (int i = 0; i < n_ranks; ++i) all[i] = i;
  return all;
}

// The most rows one command predicts: sizes, and sizes x datatypes x ops x roots.
constexpr std::size_t kMaxRows = 100000;

SizeSweep test_sizes(const CollectiveArgs& a) {
  auto size_of = [](const std::string& text, const char* flag) {
    // nccl-tests reads a bare number as bytes (and K, M, G as binary multiples), so this
    // command does too, unlike scenario keys, which need their unit.
    const bool bare = !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
    const double v = parse_quantity_text(bare ? text + "B" : text, Dimension::Bytes, key(flag));
    if (v < 0) throw InputError(key(flag), "must not be negative");
    return static_cast<Bytes>(v);
  };
  SizeSweep s;
  s.minb = size_of(a.minbytes, "minbytes");
  s.maxb = size_of(a.maxbytes, "maxbytes");
  if (s.maxb < s.minb) throw InputError("collective.maxbytes", "is smaller than --minbytes");
  s.factor = whole_number(a.stepfactor, "collective.stepfactor", 0);
  s.step = size_of(a.stepbytes, "stepbytes");
  const bool by_factor = s.factor > 1;
  if (!by_factor && s.step == 0 && s.maxb > s.minb) {
    throw InputError("collective.stepbytes", "must be > 0 when -f is not > 1");
  }
  for (Bytes b = s.minb;;) {
    s.sizes.push_back(b);
    if (s.sizes.size() > kMaxRows) {
      throw InputError(by_factor ? "collective.stepfactor" : "collective.stepbytes",
                       "more than " + std::to_string(kMaxRows) +
                           " sizes from --minbytes to --maxbytes");
    }
    if (by_factor ? (b == 0 || b > s.maxb / s.factor) : (s.step == 0 || b > s.maxb - s.step)) {
      break;
    }
    b = by_factor ? b * s.factor : b + s.step;
  }
  return s;
}

// The measurement-only flags given, as "-n 50"; they are echoed and then ignored.
std::vector<std::string> measure_flags_given(const po::variables_map& vm) {
  std::vector<std::string> given;
  for (const MeasureFlag& f : kMeasureFlags) {
    const std::string name = long_name(f.name);
    if (!vm.count(name)) continue;
    const std::string value = vm[name].as<std::string>();
    if (name != "output_file") whole_number(value, key(name), -1);
    given.push_back(label(f.name) + " " + value);
  }
  return given;
}

}  // namespace

po::options_description collective_options(CollectiveArgs& a) {
  po::options_description d(
      "usage: zerosim collective [options]\n"
      "  NCCL's choice and zerosim's predicted time for one collective, printed the way nccl-tests\n"
      "  prints a measured run: the same flags, the same table. For example\n"
      "    zerosim collective --collective all_reduce --nodes 2 --nprocs 2 -g 8 -b 8 -e 128M -f 2\n"
      "  predicts  mpirun -np 2 all_reduce_perf -g 8 -b 8 -e 128M -f 2  on two dgx-h100 nodes.\n"
      "  Without --ranks, --nprocs, -t or -g every GPU of the cluster takes part");
  po::options_description what("zerosim: what runs where");
  what.add_options()
      ("collective", po::value(&a.collective),
       "all_reduce (default), all_gather, reduce_scatter, broadcast, reduce, all_to_all, "
       "send_recv; nccl-tests' binary names (all_reduce_perf) also work. Was --op before -o "
       "became nccl-tests' reduction op")
      ("cluster", po::value(&a.cluster), "cluster preset (default dgx-h100; see `zerosim list clusters`)")
      ("nodes", po::value(&a.nodes), "nodes (default 1)")
      ("nprocs", po::value(&a.nprocs),
       "MPI processes (mpirun -np; default 1 once -t or -g is given): ranks = nprocs x nthreads x "
       "ngpus, GPUs 0 .. ranks-1 (processes packed node by node)")
      ("ranks", po::value(&a.ranks),
       "explicit GPUs in ring order instead: \"0-7\", \"0,8,16\", \"0-63:8\"")
      ("algo", po::value(&a.algo), "ring, tree, nvls, nvls_tree, pat or auto (NCCL_ALGO)")
      ("proto", po::value(&a.proto), "LL, LL128, Simple or auto (NCCL_PROTO)")
      ("nccl-version", po::value(&a.nccl_version), "tuning tables of another NCCL (default: the cluster's)")
      ("no-nvls", po::bool_switch(&a.no_nvls), "NCCL_NVLS_ENABLE=0")
      ("no-launch-overhead", po::bool_switch(&a.no_launch_overhead),
       "drop the per-call launch overhead (CUDA graphs; as -G)")
      ("no-pipeline", po::bool_switch(&a.no_pipeline), "drop zerosim's Ring/Simple slice latency term")
      ("cpu", po::value(&a.cpu), "intel|amd: host CPU vendor (NCCL's network overhead; default intel)")
      ("fabric", po::bool_switch(&a.fabric),
       "route the flows on the topology and apply the fabric factor")
      ("oversubscription", po::value(&a.oversubscription), "leaf oversubscription (implies --fabric)")
      ("nodes-per-leaf", po::value(&a.nodes_per_leaf),
       "nodes per scalable unit / rack (implies --fabric)");
  po::options_description used("nccl-tests flags that change the prediction");
  used.add_options()
      ("nthreads,t", po::value(&a.nthreads), "threads per process (default 1)")
      ("ngpus,g", po::value(&a.ngpus), "GPUs per thread (default 1)")
      ("minbytes,b", po::value(&a.minbytes), "smallest size (default 32M); K/M/G are binary")
      ("maxbytes,e", po::value(&a.maxbytes), "largest size (default 32M)")
      ("stepbytes,i", po::value(&a.stepbytes), "add this to the size each step (default 1M) ...")
      ("stepfactor,f", po::value(&a.stepfactor),
       "... or multiply it by this whole number when > 1 (default 1: off)")
      ("op,o", po::value(&a.redop),
       "reduction: sum (default), prod, max, min, avg, mulsum or all. NCCL's cost model is the "
       "same for every op; only NVLS is limited (ncclNvlsSupported: sum, min, max), so prod, avg "
       "and mulsum take ring or tree where NVLS would run. all_gather, broadcast and all_to_all "
       "have none")
      ("datatype,d", po::value(&a.datatype),
       "int8, uint8, int32, uint32, int64, uint64, half, float (default), double, bfloat16, "
       "f8e4m3, f8e5m2 (NCCL 2.24+) or all. The element size: count = size / element size, the "
       "size rounded down to whole elements (and each rank's share of all_gather, reduce_scatter "
       "and all_to_all to 16 bytes), as nccl-tests does. NVLS takes no 8-bit type, and only sum "
       "for float and double")
      ("root,r", po::value(&a.root),
       "root of broadcast and reduce (default 0; -1: every root in turn). NCCL's closed form "
       "does not depend on it; with --fabric it decides where the chain starts")
      ("cudagraph,G", po::value(&a.cudagraph),
       "CUDA graph launches (default 0); > 0 drops the per-call launch overhead");
  po::options_description measured(
      "nccl-tests flags of a real run's measurement (no effect on the prediction; a warning "
      "names them)");
  for (const MeasureFlag& f : kMeasureFlags) {
    measured.add_options()(f.name, po::value<std::string>()->value_name(f.arg), f.help);
  }
  po::options_description out("output");
  out.add_options()
      ("nccl-tests-version", po::value(&a.nccl_tests_version),
       "layout of that nccl-tests release: up to 2.17.2 (default 2.16, most published logs) or "
       "2.17.3 and later (#wrong one column wider, numbers keep 2 decimals while they fit)")
      ("verbose", po::bool_switch(&a.verbose),
       "append NCCL's algorithm, protocol and channels to each row, after nccl-tests' columns")
      ("json", po::value(&a.json_out), "FILE|-: also write JSON (\"-\": JSON on stdout instead of the table)")
      ("validate", po::value(&a.validate), "compare with a collectives.json-format file instead")
      ("markdown", po::bool_switch(&a.markdown), "with --validate: print the markdown tables")
      ("help,h", po::bool_switch(&a.help), "this help");
  d.add(what).add(used).add(measured).add(out);
  return d;
}

po::variables_map parse_collective_args(const std::vector<std::string>& args,
                                        const po::options_description& d) {
  try {
    return cli::parse(args, d, {});
  } catch (const po::unknown_option& e) {
    throw InputError("collective", std::string(e.what()) + " (see zerosim collective --help)");
  } catch (const po::error_with_option_name& e) {
    throw InputError(key(e.get_option_name()), e.what());
  } catch (const po::error& e) {
    throw InputError("collective", e.what());
  }
}

long long whole_number(const std::string& text, const std::string& key_path, long long min) {
  std::size_t used = 0;
  long long v = 0;
  try {
    v = std::stoll(text, &used, 10);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size()) {
    throw InputError(key_path, "'" + text + "' is not a whole number");
  }
  if (v < min) throw InputError(key_path, "must be at least " + std::to_string(min));
  return v;
}

long long measure_flag(const po::variables_map& vm, const char* name, long long fallback) {
  return vm.count(name) ? whole_number(vm[name].as<std::string>(), key(name), -1) : fallback;
}

CollectiveRun resolve_collective_run(const CollectiveArgs& a, const po::variables_map& vm) {
  const ClusterSpec cluster = collective_cluster(a);
  const RankLayout layout = collective_ranks(a, cluster);
  const std::vector<std::int32_t>& ranks = layout.ranks;
  const int n = static_cast<int>(ranks.size());
  const CollectiveKind kind = parse_collective_flag(a.collective);
  if (kind == CollectiveKind::SendRecv && n != 2) {
    throw InputError("collective.ranks",
                     "send_recv needs exactly 2 ranks (e.g. --ranks 0,8 or -g 2)");
  }
  const report::NcclTestsLayout table =
      report::nccl_tests_layout(a.nccl_tests_version, "collective.nccl-tests-version");
  const SizeSweep sweep = test_sizes(a);
  const std::vector<Bytes>& sizes = sweep.sizes;
  const std::vector<nccl::RedOp> ops = parse_redops(a.redop);
  const std::vector<std::string> ignored = measure_flags_given(vm);
  const nccl::ModelOptions mo = model_options(a);
  // NCCL lets a call use NVLS only for some (op, type) pairs; the others choose as without it.
  nccl::ModelOptions mo_no_nvls = mo;
  mo_no_nvls.nvls_enable = false;
  const nccl::NcclModel with_nvls(cluster, mo), without_nvls(cluster, mo_no_nvls);
  const nccl::Constants& k = with_nvls.constants();
  const std::vector<nccl::DataType> types = parse_datatypes(a.datatype, k);
  const std::vector<int> roots = parse_roots(a.root, kind, n);
  const std::optional<Topology> topo = fabric_topology(a, cluster);
  const std::vector<nccl::RedOp> row_ops =
      nccl::test_has_op(kind) ? ops : std::vector<nccl::RedOp>{nccl::RedOp::Sum};
  if (sizes.size() * types.size() * row_ops.size() * roots.size() > kMaxRows) {
    throw InputError("collective", "more than " + std::to_string(kMaxRows) +
                                       " rows (sizes x datatypes x ops x roots)");
  }
  return CollectiveRun{cluster, layout, kind, table, sweep, ignored, mo, with_nvls, without_nvls,
                       types, roots, topo, row_ops};
}

}  // namespace zerosim::cli::collective_detail
