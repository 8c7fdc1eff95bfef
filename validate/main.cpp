// zerosim-validate: replays zerosim's plan on real hardware (or on the CPU), compares measured with
// predicted times, benchmarks a machine into calibration.json, and checks ZeRO sharding and the
// Adam kernel. Launched like nccl-tests:
//
//   mpirun -np N zerosim-validate replay PLAN.json --backend gpu --out replay.json
//   zerosim-validate replay PLAN.json                      (CPU backend, every rank a thread)
//   zerosim-validate compare replay.json [--top 20] [--sort abs|pct] [--json FILE]
//   mpirun -np N zerosim-validate bench --out calibration.json [--quick] [--plan PLAN.json]
//   zerosim-validate zero-check [--stages 1,2,3] [--ranks 1-8] [--partition padded|uneven|both]
//   zerosim-validate kernel-check [--seed S] [--out FILE]
//   zerosim-validate schedule PLAN.json                    (collective matching + deadlock check)
//
// Exit status: 0 success; 1 a check failed or the run failed; 2 bad input (usage, plan file).
// Under mpirun a failing rank prints its error and aborts the job (MPI_Abort), so no rank hangs.

#include <boost/program_options.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "validate/compare.h"
#include "validate/cpu_backend.h"
#include "validate/replay.h"
#include "validate/schedule.h"
#include "validate/thread_comm.h"
#include "validate/zero_check.h"

#ifdef ZEROSIM_HAVE_MPI
#include "validate/mpi_comm.h"
#endif
#ifdef ZEROSIM_VALIDATE_GPU
#include "validate/calibration.h"
#include "validate/gpu/bench.h"
#include "validate/gpu/gpu_backend.h"
#include "validate/gpu/kernel_check.h"
#endif

namespace po = boost::program_options;
namespace zv = zerosim::validate;

namespace {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

const char* kUsage =
    "usage: zerosim-validate <command> [args]\n"
    "  replay PLAN.json [--backend cpu|gpu] [--out FILE] [--warmup W] [--iters K] [--timeout SEC]\n"
    "                   [--cpu-max-elements N] [--adam-grad f32|bf16|f16] [--no-attention]\n"
    "  compare REPLAY.json [--top N] [--sort abs|pct] [--json FILE]\n"
    "  bench [--out FILE] [--quick] [--max-bytes B] [--plan PLAN.json] [--timeout SEC]\n"
    "  zero-check [--stages 1,2,3] [--ranks N|A-B] [--steps K] [--sizes a,b,...]\n"
    "             [--partition padded|uneven|both]\n"
    "  kernel-check [--seed S] [--out FILE]\n"
    "  schedule PLAN.json\n"
    "Run under mpirun for one process per rank; without it the CPU backend runs ranks as threads.\n";

// One subcommand's command line: its positional arguments and its options (with their defaults).
struct Args {
  std::vector<std::string> positional;
  po::variables_map options;

  [[nodiscard]] bool has(const std::string& k) const { return options.count(k) > 0; }
  [[nodiscard]] std::string str(const std::string& k) const { return options[k].as<std::string>(); }
  [[nodiscard]] long long integer(const std::string& k) const { return options[k].as<long long>(); }
  [[nodiscard]] bool flag(const std::string& k) const { return options[k].as<bool>(); }
};

// argv[first..] against one subcommand's options: `--name VALUE` (or `--name=VALUE`), any other
// word positional. Boost's default grammar would also take abbreviations, which let a new option
// silently change what an old command line means, and short options, which would turn a value
// like "-1" into an unknown option. A repeated option keeps its last value, as it always did here
// (store() alone would refuse the repeat).
Args parse(int argc, char** argv, int first, const po::options_description& described) {
  namespace style = po::command_line_style;
  try {
    const std::vector<std::string> words(argv + first, argv + argc);
    po::parsed_options parsed =
        po::command_line_parser(words)
            .options(described)
            .style(style::allow_long | style::long_allow_next | style::long_allow_adjacent)
            .run();
    Args a;
    a.positional = po::collect_unrecognized(parsed.options, po::include_positional);
    std::vector<po::option> last;
    std::set<std::string> seen;
    for (auto it = parsed.options.rbegin(); it != parsed.options.rend(); ++it) {
      if (it->position_key == -1 && seen.insert(it->string_key).second) last.push_back(*it);
    }
    parsed.options.assign(last.rbegin(), last.rend());
    po::store(parsed, a.options);
    po::notify(a.options);
    return a;
  } catch (const po::unknown_option& e) {
    std::string valid;
    for (const auto& o : described.options()) valid += " --" + o->long_name();
    throw UsageError(std::string(e.what()) + "; valid:" + valid);
  } catch (const po::error& e) {
    throw UsageError(e.what());
  }
}

std::vector<long long> parse_list(const std::string& s, const char* what) {
  std::vector<long long> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    try {
      out.push_back(std::stoll(item));
    } catch (const std::exception&) {
      throw UsageError(std::string(what) + ": '" + item + "' is not an integer");
    }
  }
  if (out.empty()) throw UsageError(std::string(what) + ": empty list");
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::cout << text;
    return;
  }
  std::ofstream out(path);
  if (!out || !(out << text)) throw std::runtime_error(path + ": cannot write");
}

// What kind of process this is: standalone (threads as ranks) or one MPI rank of several.
struct Launch {
  bool mpi = false;
  int rank = 0, size = 1, local_rank = 0;
};

#ifdef ZEROSIM_VALIDATE_GPU
zerosim::kernels::DType adam_grad_dtype(const std::string& s) {
  if (s == "f32") return zerosim::kernels::DType::F32;
  if (s == "bf16") return zerosim::kernels::DType::BF16;
  if (s == "f16") return zerosim::kernels::DType::F16;
  throw UsageError("--adam-grad: f32, bf16 or f16, got '" + s + "'");
}
#endif

// ---- replay -----------------------------------------------------------------------------------

po::options_description replay_options() {
  po::options_description d;
  d.add_options()
      ("backend", po::value<std::string>()->default_value("cpu"))
      ("out", po::value<std::string>()->default_value("replay.json"))
      ("warmup", po::value<long long>()->default_value(1))
      ("iters", po::value<long long>()->default_value(3))
      ("timeout", po::value<long long>()->default_value(300))
      ("cpu-max-elements", po::value<long long>()->default_value(zv::CpuBackendOptions{}.max_elements))
      ("adam-grad", po::value<std::string>()->default_value("f32"))
      ("no-attention", po::bool_switch());
  return d;
}

int cmd_replay(const Args& a, const Launch& L) {
  if (a.positional.size() != 1) throw UsageError("replay: give one PLAN.json");
  const std::string backend = a.str("backend");
  if (backend != "cpu" && backend != "gpu") throw UsageError("--backend: cpu or gpu, got '" + backend + "'");
  zv::ReplayOptions opt;
  opt.warmup = static_cast<int>(a.integer("warmup"));
  opt.iters = static_cast<int>(a.integer("iters"));
  if (opt.warmup < 0 || opt.iters < 1) throw UsageError("--warmup must be >= 0 and --iters >= 1");
  const auto timeout = std::chrono::seconds(a.integer("timeout"));
  if (timeout.count() < 1) throw UsageError("--timeout: seconds >= 1");
  opt.timeout = timeout;
  zv::CpuBackendOptions cpu;
  cpu.max_elements = a.integer("cpu-max-elements");
  const std::string out_path = a.str("out");

  const zv::ReplayPlan plan = zv::read_plan_file(a.positional[0]);
  const zv::Schedule sched = plan.has_all_ranks() ? zv::build_schedule(plan) : zv::build_local_schedule(plan);
  if (!plan.has_all_ranks() && L.rank == 0) {
    std::cerr << "zerosim-validate: the plan holds " << plan.ranks.size() << " of " << plan.num_ranks
              << " ranks; collective order across ranks is taken from predicted start times\n";
  }

  std::vector<nlohmann::json> rank_json;
  std::string device;
  if (!L.mpi || L.size == 1) {
    if (backend == "cpu") {
      if (!plan.has_all_ranks()) throw UsageError("replay with threads needs every rank of the plan");
      const auto results = zv::replay_threads_cpu(plan, sched, cpu, opt);
      for (const auto& r : results) rank_json.push_back(zv::rank_result_json(plan, r));
      device = "host CPU (threads as ranks)";
    } else {
#ifdef ZEROSIM_VALIDATE_GPU
      if (plan.num_ranks != 1) {
        throw UsageError("the plan has " + std::to_string(plan.num_ranks) +
                         " ranks: launch one process per rank, mpirun -np " + std::to_string(plan.num_ranks));
      }
      zv::ThreadWorld world(1, zv::plan_groups(plan));
      world.set_timeout(timeout);
      auto boot = world.comm(0);
      zv::gpu::GpuBackendOptions go;
      go.timeout = timeout;
      go.adam_grad = adam_grad_dtype(a.str("adam-grad"));
      go.emulate_attention = !a.flag("no-attention");
      zv::gpu::GpuBackend gb(*boot, L.local_rank, go);
      auto r = zv::replay_rank(plan, sched.ranks.at(0), gb, opt, nullptr);
      device = gb.device();
      rank_json.push_back(zv::rank_result_json(plan, r));
#else
      throw UsageError("--backend gpu: this build has no GPU harness (configure with CUDA and NCCL)");
#endif
    }
  } else {
#ifdef ZEROSIM_HAVE_MPI
    if (plan.num_ranks != L.size) {
      throw UsageError("the plan has " + std::to_string(plan.num_ranks) + " ranks but mpirun started " +
                       std::to_string(L.size) + " processes");
    }
    const zv::RankSchedule* rs = sched.find_rank(L.rank);
    if (rs == nullptr) throw UsageError("the plan file holds no ops for rank " + std::to_string(L.rank));
    zv::MpiComm comm(zv::plan_groups(plan));
    comm.set_timeout(timeout);
    std::unique_ptr<zv::Backend> be;
    if (backend == "cpu") {
      be = std::make_unique<zv::CpuBackend>(comm, cpu);
    } else {
#ifdef ZEROSIM_VALIDATE_GPU
      zv::gpu::GpuBackendOptions go;
      go.timeout = timeout;
      go.adam_grad = adam_grad_dtype(a.str("adam-grad"));
      go.emulate_attention = !a.flag("no-attention");
      be = std::make_unique<zv::gpu::GpuBackend>(comm, L.local_rank, go);
#else
      throw UsageError("--backend gpu: this build has no GPU harness (configure with CUDA and NCCL)");
#endif
    }
    auto r = zv::replay_rank(plan, *rs, *be, opt, &comm);
    device = be->device();
    const auto all = zv::mpi_gather_strings(zv::rank_result_json(plan, r).dump());
    for (const auto& s : all) rank_json.push_back(nlohmann::json::parse(s));
#endif
  }
  if (L.rank != 0) return 0;
  const nlohmann::json out = zv::replay_output(plan, rank_json, backend, device, opt);
  write_file(out_path, out.dump(1) + "\n");
  std::printf("replayed %d rank(s) on %s (%s backend), %d timed step(s)\n", plan.num_ranks,
              device.c_str(), backend.c_str(), opt.iters);
  std::printf("step: predicted %.6f s, measured %.6f s  -> %s\n",
              out["step"]["predicted_s"].get<double>(), out["step"]["measured_s"].get<double>(),
              out_path.c_str());
  return 0;
}

// ---- compare ----------------------------------------------------------------------------------

po::options_description compare_options() {
  po::options_description d;
  d.add_options()
      ("top", po::value<long long>()->default_value(20))
      ("sort", po::value<std::string>()->default_value("abs"))
      ("json", po::value<std::string>());
  return d;
}

int cmd_compare(const Args& a, const Launch& L) {
  if (L.rank != 0) return 0;
  if (a.positional.size() != 1) throw UsageError("compare: give one REPLAY.json");
  std::ifstream in(a.positional[0]);
  if (!in) throw UsageError(a.positional[0] + ": cannot open");
  nlohmann::json doc;
  try {
    in >> doc;
  } catch (const nlohmann::json::exception& e) {
    throw UsageError(a.positional[0] + ": not valid JSON: " + e.what());
  }
  const std::string sort = a.str("sort");
  if (sort != "abs" && sort != "pct") throw UsageError("--sort: abs or pct");
  const int top = static_cast<int>(a.integer("top"));
  zv::CompareReport rep;
  try {
    rep = zv::compare_replay(doc, sort == "pct" ? zv::SortBy::Percent : zv::SortBy::AbsoluteSeconds);
  } catch (const zv::CompareError& e) {
    throw UsageError(a.positional[0] + ": " + e.what());
  }
  zv::print_compare(std::cout, rep, top);
  if (a.has("json")) write_file(a.str("json"), zv::compare_json(rep, top).dump(1) + "\n");
  return 0;
}

// ---- zero-check -------------------------------------------------------------------------------

po::options_description zero_check_options() {
  po::options_description d;
  d.add_options()
      ("stages", po::value<std::string>()->default_value("1,2,3"))
      ("ranks", po::value<std::string>())
      ("steps", po::value<long long>()->default_value(4))
      ("sizes", po::value<std::string>())
      ("partition", po::value<std::string>()->default_value("both"));
  return d;
}

int cmd_zero_check(const Args& a, const Launch& L) {
  zv::ZeroCheckConfig base;
  base.steps = static_cast<int>(a.integer("steps"));
  if (a.has("sizes")) {
    base.tensor_sizes.clear();
    for (auto s : parse_list(a.str("sizes"), "--sizes")) base.tensor_sizes.push_back(s);
  }
  std::vector<long long> stages = parse_list(a.str("stages"), "--stages");
  const std::string part = a.str("partition");
  std::vector<zv::Partition> parts;
  if (part == "padded" || part == "both") parts.push_back(zv::Partition::Padded);
  if (part == "uneven" || part == "both") parts.push_back(zv::Partition::Uneven);
  if (parts.empty()) throw UsageError("--partition: padded, uneven or both");
  int lo = 1, hi = 8;
  if (a.has("ranks")) {
    const std::string r = a.str("ranks");
    const auto dash = r.find('-');
    try {
      lo = std::stoi(r.substr(0, dash));
      hi = dash == std::string::npos ? lo : std::stoi(r.substr(dash + 1));
    } catch (const std::exception&) {
      throw UsageError("--ranks: N or A-B, got '" + r + "'");
    }
  }
  int failures = 0, runs = 0;
  for (long long stage : stages) {
    if (stage < 1 || stage > 3) throw UsageError("--stages: 1, 2 or 3");
    for (zv::Partition p : parts) {
      zv::ZeroCheckConfig cfg = base;
      cfg.stage = static_cast<int>(stage);
      cfg.partition = p;
      if (L.mpi && L.size > 1) {
#ifdef ZEROSIM_HAVE_MPI
        std::vector<int> all(L.size);
        std::iota(all.begin(), all.end(), 0);
        zv::MpiComm comm({all});
        const zv::ModelState got = zv::run_sharded(comm, 0, cfg);
        const std::string diff = zv::first_difference(got, zv::run_unsharded(L.size, cfg));
        std::vector<float> bad{diff.empty() ? 0.0f : 1.0f};
        comm.all_reduce(0, bad);
        ++runs;
        if (bad[0] != 0) ++failures;
        if (L.rank == 0) {
          std::printf("zero-check stage %lld %-6s %d MPI ranks: %s\n", stage, zv::to_string(p), L.size,
                      bad[0] == 0 ? "bit-identical to the unsharded run" : "DIFFERS");
        }
        if (!diff.empty()) std::fprintf(stderr, "rank %d: %s\n", L.rank, diff.c_str());
#endif
      } else {
        for (int n = lo; n <= hi; ++n) {
          const auto states = zv::run_sharded_threads(n, cfg);
          const zv::ModelState ref = zv::run_unsharded(n, cfg);
          std::string diff;
          for (int r = 0; r < n && diff.empty(); ++r) {
            diff = zv::first_difference(states[r], ref);
            if (!diff.empty()) diff = "rank " + std::to_string(r) + ": " + diff;
          }
          ++runs;
          if (!diff.empty()) ++failures;
          std::printf("zero-check stage %lld %-6s %d thread ranks: %s%s\n", stage, zv::to_string(p), n,
                      diff.empty() ? "bit-identical to the unsharded run" : "DIFFERS: ", diff.c_str());
        }
      }
    }
  }
  if (L.rank == 0) std::printf("zero-check: %d of %d runs bit-identical\n", runs - failures, runs);
  return failures == 0 ? 0 : 1;
}

// ---- schedule ---------------------------------------------------------------------------------

int cmd_schedule(const Args& a, const Launch& L) {
  if (a.positional.size() != 1) throw UsageError("schedule: give one PLAN.json");
  const zv::ReplayPlan plan = zv::read_plan_file(a.positional[0]);
  const zv::Schedule s = zv::build_schedule(plan);
  std::size_t ops = 0;
  for (const auto& r : plan.ranks) ops += r.ops.size();
  if (L.rank == 0) {
    std::printf("schedule: %d ranks, %zu ops, %lld collectives matched across ranks; no deadlock\n",
                plan.num_ranks, ops, static_cast<long long>(s.collectives));
  }
  return 0;
}

// ---- GPU-only commands ------------------------------------------------------------------------

// Declared in every build, so that a build without the GPU harness still says so rather than
// refuse the flags.
po::options_description bench_options() {
  po::options_description d;
  d.add_options()
      ("out", po::value<std::string>()->default_value("calibration.json"))
      ("quick", po::bool_switch())
      ("max-bytes", po::value<long long>())
      ("plan", po::value<std::string>())
      ("timeout", po::value<long long>()->default_value(300));
  return d;
}

po::options_description kernel_check_options() {
  po::options_description d;
  d.add_options()
      ("seed", po::value<long long>())
      ("out", po::value<std::string>());
  return d;
}

int cmd_bench(const Args& a, const Launch& L) {
#ifdef ZEROSIM_VALIDATE_GPU
  zv::gpu::BenchOptions o;
  o.quick = a.flag("quick");
  if (a.has("max-bytes")) o.max_coll_bytes = a.integer("max-bytes");
  o.timeout = std::chrono::seconds(a.integer("timeout"));
  o.log = &std::cout;
  if (a.has("plan")) {
    const zv::ReplayPlan plan = zv::read_plan_file(a.str("plan"));
    for (const auto& r : plan.ranks) {
      for (const auto& op : r.ops) {
        for (const auto& g : op.gemms) o.extra_gemms.push_back(g);
      }
    }
  }
  std::vector<int> all(L.size);
  std::iota(all.begin(), all.end(), 0);
  std::unique_ptr<zv::Comm> boot;
  std::unique_ptr<zv::ThreadWorld> world;
#ifdef ZEROSIM_HAVE_MPI
  if (L.mpi) boot = std::make_unique<zv::MpiComm>(std::vector<std::vector<int>>{all});
#endif
  if (!boot) {
    world = std::make_unique<zv::ThreadWorld>(1, std::vector<std::vector<int>>{all});
    boot = world->comm(0);
  }
  boot->set_timeout(o.timeout);
  const zv::Calibration cal = zv::gpu::run_bench(*boot, L.local_rank, o);
  if (L.rank == 0) {
    const std::string out = a.str("out");
    write_file(out, zv::calibration_json(cal).dump(1) + "\n");
    std::printf("bench: %s x%d -> %s\n", cal.gpu.c_str(), cal.num_gpus, out.c_str());
  }
  return 0;
#else
  (void)a;
  (void)L;
  throw UsageError("bench: this build has no GPU harness (configure with CUDA and NCCL)");
#endif
}

int cmd_kernel_check(const Args& a, const Launch& L) {
#ifdef ZEROSIM_VALIDATE_GPU
  if (L.rank != 0) return 0;
  zv::gpu::select_device(L.local_rank);
  const auto seed = static_cast<std::uint64_t>(
      a.has("seed") ? a.integer("seed")
                    : std::chrono::steady_clock::now().time_since_epoch().count() & 0x7FFFFFFF);
  const auto res = zv::gpu::run_kernel_check(seed, std::cout);
  if (a.has("out")) write_file(a.str("out"), res.json.dump(1) + "\n");
  return res.failures == 0 ? 0 : 1;
#else
  (void)a;
  (void)L;
  throw UsageError("kernel-check: this build has no GPU harness (configure with CUDA and NCCL)");
#endif
}

struct Command {
  const char* name;
  po::options_description (*options)();
  int (*run)(const Args&, const Launch&);
};

const Command kCommands[] = {
    {"replay", replay_options, cmd_replay},
    {"compare", compare_options, cmd_compare},
    {"bench", bench_options, cmd_bench},
    {"zero-check", zero_check_options, cmd_zero_check},
    {"kernel-check", kernel_check_options, cmd_kernel_check},
    {"schedule", [] { return po::options_description(); }, cmd_schedule},
};

int dispatch(int argc, char** argv, const Launch& L) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    if (L.rank == 0) std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  for (const Command& c : kCommands) {
    if (cmd == c.name) return c.run(parse(argc, argv, 2, c.options()), L);
  }
  throw UsageError("unknown command '" + cmd + "'");
}

}  // namespace

int main(int argc, char** argv) {
  Launch L;
#ifdef ZEROSIM_HAVE_MPI
  std::unique_ptr<zv::MpiSession> mpi;
  if (zv::launched_by_mpi_launcher()) {
    try {
      mpi = std::make_unique<zv::MpiSession>(&argc, &argv);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "zerosim-validate: MPI start-up failed: %s\n", e.what());
      return 1;
    }
    L.mpi = true;
    L.rank = mpi->rank();
    L.size = mpi->size();
    L.local_rank = mpi->local_rank();
  }
#endif
  int code = 0;
  try {
    code = dispatch(argc, argv, L);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "zerosim-validate: %s\n", e.what());
    if (L.rank == 0) std::fputs(kUsage, stderr);
    code = 2;
  } catch (const zv::PlanError& e) {
    std::fprintf(stderr, "zerosim-validate: %s\n", e.what());
    code = 2;
  } catch (const std::exception& e) {
    if (L.mpi) std::fprintf(stderr, "zerosim-validate: rank %d: %s\n", L.rank, e.what());
    else std::fprintf(stderr, "zerosim-validate: %s\n", e.what());
    code = 1;
  }
#ifdef ZEROSIM_HAVE_MPI
  // One failing rank must not leave the others waiting in a collective.
  if (mpi && L.size > 1 && code != 0) {
    std::fflush(stderr);
    zv::MpiSession::abort(code);
  }
#endif
  return code;
}
