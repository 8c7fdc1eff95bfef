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

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
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

struct Args {
  std::vector<std::string> positional;
  std::map<std::string, std::string> values;
  std::set<std::string> flags;

  std::string get(const std::string& k, const std::string& def) const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
  long long get_int(const std::string& k, long long def) const {
    auto it = values.find(k);
    if (it == values.end()) return def;
    try {
      std::size_t used = 0;
      const long long v = std::stoll(it->second, &used);
      if (used != it->second.size()) throw std::invalid_argument("trailing");
      return v;
    } catch (const std::exception&) {
      throw UsageError("--" + k + ": expected an integer, got '" + it->second + "'");
    }
  }
};

Args parse(int argc, char** argv, int first, const std::set<std::string>& with_value,
           const std::set<std::string>& bool_flags) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    s = s.substr(2);
    if (bool_flags.count(s)) {
      a.flags.insert(s);
    } else if (with_value.count(s)) {
      if (i + 1 >= argc) throw UsageError("--" + s + " needs a value");
      a.values[s] = argv[++i];
    } else {
      std::string valid;
      for (const auto& v : with_value) valid += " --" + v;
      for (const auto& v : bool_flags) valid += " --" + v;
      throw UsageError("unknown option --" + s + "; valid:" + valid);
    }
  }
  return a;
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

int cmd_replay(const Args& a, const Launch& L) {
  if (a.positional.size() != 1) throw UsageError("replay: give one PLAN.json");
  const std::string backend = a.get("backend", "cpu");
  if (backend != "cpu" && backend != "gpu") throw UsageError("--backend: cpu or gpu, got '" + backend + "'");
  zv::ReplayOptions opt;
  opt.warmup = static_cast<int>(a.get_int("warmup", 1));
  opt.iters = static_cast<int>(a.get_int("iters", 3));
  if (opt.warmup < 0 || opt.iters < 1) throw UsageError("--warmup must be >= 0 and --iters >= 1");
  const auto timeout = std::chrono::seconds(a.get_int("timeout", 300));
  if (timeout.count() < 1) throw UsageError("--timeout: seconds >= 1");
  opt.timeout = timeout;
  zv::CpuBackendOptions cpu;
  cpu.max_elements = a.get_int("cpu-max-elements", cpu.max_elements);
  const std::string out_path = a.get("out", "replay.json");

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
      go.adam_grad = adam_grad_dtype(a.get("adam-grad", "f32"));
      go.emulate_attention = !a.flags.count("no-attention");
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
      go.adam_grad = adam_grad_dtype(a.get("adam-grad", "f32"));
      go.emulate_attention = !a.flags.count("no-attention");
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
  const std::string sort = a.get("sort", "abs");
  if (sort != "abs" && sort != "pct") throw UsageError("--sort: abs or pct");
  const int top = static_cast<int>(a.get_int("top", 20));
  zv::CompareReport rep;
  try {
    rep = zv::compare_replay(doc, sort == "pct" ? zv::SortBy::Percent : zv::SortBy::AbsoluteSeconds);
  } catch (const zv::CompareError& e) {
    throw UsageError(a.positional[0] + ": " + e.what());
  }
  zv::print_compare(std::cout, rep, top);
  if (a.values.count("json")) write_file(a.get("json", ""), zv::compare_json(rep, top).dump(1) + "\n");
  return 0;
}

// ---- zero-check -------------------------------------------------------------------------------

int cmd_zero_check(const Args& a, const Launch& L) {
  zv::ZeroCheckConfig base;
  base.steps = static_cast<int>(a.get_int("steps", 4));
  if (a.values.count("sizes")) {
    base.tensor_sizes.clear();
    for (auto s : parse_list(a.get("sizes", ""), "--sizes")) base.tensor_sizes.push_back(s);
  }
  std::vector<long long> stages = parse_list(a.get("stages", "1,2,3"), "--stages");
  const std::string part = a.get("partition", "both");
  std::vector<zv::Partition> parts;
  if (part == "padded" || part == "both") parts.push_back(zv::Partition::Padded);
  if (part == "uneven" || part == "both") parts.push_back(zv::Partition::Uneven);
  if (parts.empty()) throw UsageError("--partition: padded, uneven or both");
  int lo = 1, hi = 8;
  if (a.values.count("ranks")) {
    const std::string r = a.get("ranks", "");
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

int cmd_bench(const Args& a, const Launch& L) {
#ifdef ZEROSIM_VALIDATE_GPU
  zv::gpu::BenchOptions o;
  o.quick = a.flags.count("quick") > 0;
  o.max_coll_bytes = a.get_int("max-bytes", o.max_coll_bytes);
  o.timeout = std::chrono::seconds(a.get_int("timeout", 300));
  o.log = &std::cout;
  if (a.values.count("plan")) {
    const zv::ReplayPlan plan = zv::read_plan_file(a.get("plan", ""));
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
    const std::string out = a.get("out", "calibration.json");
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
      a.get_int("seed", std::chrono::steady_clock::now().time_since_epoch().count() & 0x7FFFFFFF));
  const auto res = zv::gpu::run_kernel_check(seed, std::cout);
  if (a.values.count("out")) write_file(a.get("out", ""), res.json.dump(1) + "\n");
  return res.failures == 0 ? 0 : 1;
#else
  (void)a;
  (void)L;
  throw UsageError("kernel-check: this build has no GPU harness (configure with CUDA and NCCL)");
#endif
}

int dispatch(int argc, char** argv, const Launch& L) {
  if (argc < 2 || std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help") {
    if (L.rank == 0) std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "replay") {
    return cmd_replay(parse(argc, argv, 2, {"backend", "out", "warmup", "iters", "timeout", "cpu-max-elements", "adam-grad"},
                            {"no-attention"}),
                      L);
  }
  if (cmd == "compare") return cmd_compare(parse(argc, argv, 2, {"top", "sort", "json"}, {}), L);
  if (cmd == "bench") return cmd_bench(parse(argc, argv, 2, {"out", "max-bytes", "plan", "timeout"}, {"quick"}), L);
  if (cmd == "zero-check") {
    return cmd_zero_check(parse(argc, argv, 2, {"stages", "ranks", "steps", "sizes", "partition"}, {}), L);
  }
  if (cmd == "kernel-check") return cmd_kernel_check(parse(argc, argv, 2, {"seed", "out"}, {}), L);
  if (cmd == "schedule") return cmd_schedule(parse(argc, argv, 2, {}, {}), L);
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
