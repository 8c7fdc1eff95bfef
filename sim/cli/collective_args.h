#pragma once
// The `zerosim collective` command line (collective_args.cpp): nccl-tests' flags and zerosim's,
// parsed, checked (InputError with key path "collective.<flag>") and mapped onto what one
// prediction needs: the cluster, the ranks, the sizes, datatypes, ops and roots, and the NCCL
// model's options. Running it and printing nccl-tests' table is collective_command.cpp.
#include <boost/program_options.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/cluster/topology.h"
#include "sim/collective/nccl_model.h"
#include "sim/collective/nccl_tests.h"
#include "sim/core/units.h"
#include "sim/report/nccl_tests_table.h"

namespace zerosim::cli::collective_detail {

namespace po = boost::program_options;

// The command line as given; values are checked (with their collective.<flag> key paths) when
// they are used. The nccl-tests flags keep nccl-tests' defaults (src/common.cu).
struct CollectiveArgs {
  std::string cluster = "dgx-h100", nodes, ranks, collective = "all_reduce", nprocs, nthreads,
              ngpus, minbytes = "32M", maxbytes = "32M", stepbytes = "1M", stepfactor = "1",
              redop = "sum", datatype = "float", root = "0", cudagraph = "0",
              nccl_tests_version = "2.16", algo, proto, nccl_version, cpu, oversubscription,
              nodes_per_leaf, json_out, validate;
  bool no_nvls = false, no_launch_overhead = false, no_pipeline = false, fabric = false,
       verbose = false, markdown = false, help = false;
};

// The options (with --help's text) bound to `a`.
po::options_description collective_options(CollectiveArgs& a);

// Parse errors as InputError: an unknown option names the command, a bad value its flag.
po::variables_map parse_collective_args(const std::vector<std::string>& args,
                                        const po::options_description& d);

// A whole number, as nccl-tests reads its numeric flags (strtol), at least `min`.
long long whole_number(const std::string& text, const std::string& key_path, long long min);

// A measurement-only flag's value (-w, -n, -m: echoed in nccl-tests' preamble line), or
// `fallback` when not given.
long long measure_flag(const po::variables_map& vm, const char* name, long long fallback);

// The GPUs taking part and how nccl-tests would have been started on them.
struct RankLayout {
  std::vector<std::int32_t> ranks;
  long long nprocs = 1, nthreads = 1, ngpus = 1;  // echoed in the "# nThread" line
};

// nccl-tests' size loop: from -b while <= -e, times -f when it is > 1, else plus -i.
struct SizeSweep {
  Bytes minb = 0, maxb = 0, step = 0;
  long long factor = 1;
  std::vector<Bytes> sizes;
};

// Everything the rows depend on, resolved from the flags in the order their errors are
// reported.
struct CollectiveRun {
  ClusterSpec cluster;
  RankLayout layout;
  CollectiveKind kind;
  report::NcclTestsLayout table;
  SizeSweep sweep;
  std::vector<std::string> ignored;  // the measurement-only flags given, as "-n 50"
  nccl::ModelOptions mo;
  // NCCL lets a call use NVLS only for some (op, type) pairs; the others choose as without it.
  nccl::NcclModel with_nvls, without_nvls;
  std::vector<nccl::DataType> types;
  std::vector<int> roots;
  std::optional<Topology> topo;
  std::vector<nccl::RedOp> row_ops;  // the ops a row is printed for (sum where none applies)
};

CollectiveRun resolve_collective_run(const CollectiveArgs& a, const po::variables_map& vm);

}  // namespace zerosim::cli::collective_detail
