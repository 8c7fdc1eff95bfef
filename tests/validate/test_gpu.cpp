// The GPU harness (built with CUDA, cuBLAS and NCCL). The error-macro tests run anywhere; the rest
// skip, saying why, on a machine without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <sstream>
#include <string>

#include "validate/gpu/bench.h"
#include "validate/gpu/gpu_backend.h"
#include "validate/gpu/gpu_check.h"
#include "validate/gpu/kernel_check.h"
#include "validate/replay.h"
#include "validate/thread_comm.h"

#ifndef ZEROSIM_VALIDATE_GPU
#error "test_gpu.cpp needs zerosim::validate_gpu"
#endif

namespace zv = zerosim::validate;
namespace zg = zerosim::validate::gpu;

namespace {

#define SKIP_WITHOUT_GPU()                                                                     \
  do {                                                                                         \
    int count_ = 0;                                                                            \
    const cudaError_t err_ = cudaGetDeviceCount(&count_);                                      \
    if (err_ != cudaSuccess) {                                                                 \
      GTEST_SKIP() << "no usable CUDA device: cudaGetDeviceCount returned "                    \
                   << cudaGetErrorName(err_);                                                  \
    }                                                                                          \
    if (count_ == 0) GTEST_SKIP() << "no CUDA device present";                                 \
  } while (0)

TEST(GpuChecks, NcclAndCublasErrorsThrowWithTheirNames) {
  try {
    ZEROSIM_NCCL_CHECK(ncclInvalidArgument);
    ADD_FAILURE() << "no exception";
  } catch (const zg::NcclError& e) {
    EXPECT_NE(std::string(e.what()).find("ncclInvalidArgument"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("test_gpu.cpp"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ncclInvalidArgument);
  }
  EXPECT_NO_THROW(ZEROSIM_NCCL_CHECK(ncclInProgress));  // non-blocking communicators
  try {
    ZEROSIM_CUBLAS_CHECK(CUBLAS_STATUS_NOT_INITIALIZED);
    ADD_FAILURE() << "no exception";
  } catch (const zg::CublasError& e) {
    EXPECT_NE(std::string(e.what()).find("CUBLAS_STATUS_NOT_INITIALIZED"), std::string::npos) << e.what();
  }
}

// A one-rank plan with GEMMs, attention, a collective on a 1-rank group, an Adam step, a CPU-stream
// Adam step and host copies: everything runs and every timed op takes time.
nlohmann::json one_rank_plan() {
  auto gemm = [](int m, int n, int k) { return nlohmann::json{{"name", "g"}, {"m", m}, {"n", n}, {"k", k}, {"count", 2}}; };
  nlohmann::json ops = nlohmann::json::array({
      {{"id", 0}, {"kind", "compute"}, {"stream", "compute"}, {"name", "fwd attention"}, {"deps", nlohmann::json::array()},
       {"work", "attention_forward"}, {"gemms", {gemm(1024, 3072, 1024)}}, {"attention_flops", 4.0 * 1024 * 1024 * 64 * 16}},
      {{"id", 1}, {"kind", "collective"}, {"stream", "dp-comm"}, {"name", "grad all_reduce"}, {"deps", {0}},
       {"collective", "all_reduce"}, {"group", 0}, {"bytes", 1 << 24}},
      {{"id", 2}, {"kind", "compute"}, {"stream", "compute"}, {"name", "optimizer step"}, {"deps", {1}},
       {"work", "optimizer_step"}, {"elements", 1 << 22}},
      {{"id", 3}, {"kind", "copy"}, {"stream", "d2h"}, {"name", "grads to host"}, {"deps", {2}}, {"bytes", 1 << 24}},
      {{"id", 4}, {"kind", "compute"}, {"stream", "cpu"}, {"name", "cpu adam"}, {"deps", {3}},
       {"work", "optimizer_step"}, {"elements", 1 << 16}},
      {{"id", 5}, {"kind", "copy"}, {"stream", "h2d"}, {"name", "params to device"}, {"deps", {4}}, {"bytes", 1 << 23}},
  });
  return {{"format", "zerosim-plan/1"},
          {"num_ranks", 1},
          {"scenario", {{"model", {{"seq_length", 1024}, {"hidden_size", 1024}, {"num_attention_heads", 16}}}}},
          {"groups", {{{"id", 0}, {"name", "dp0"}, {"kind", "dp"}, {"ranks", {0}}}}},
          {"ranks", {{{"rank", 0}, {"ops", ops}}}}};
}

TEST(GpuReplay, OneRankPlanRunsAndIsTimed) {
  SKIP_WITHOUT_GPU();
  const zv::ReplayPlan plan = zv::parse_plan(one_rank_plan());
  const zv::Schedule sched = zv::build_schedule(plan);
  zv::ThreadWorld world(1, zv::plan_groups(plan));
  auto boot = world.comm(0);
  zg::GpuBackend gpu(*boot, 0, {});
  zv::ReplayOptions opt;
  opt.warmup = 1;
  opt.iters = 3;
  const zv::RankResult r = zv::replay_rank(plan, sched.ranks[0], gpu, opt, nullptr);
  ASSERT_EQ(r.ops.size(), 6u);
  for (int id = 0; id < 6; ++id) EXPECT_GT(r.ops[id].duration_s, 0) << "op " << id;
  // Stream order and deps hold on the GPU: each op starts after its dep ended (event clock).
  for (int id = 1; id < 6; ++id) {
    EXPECT_GE(r.ops[id].start_s + 1e-6, r.ops[id - 1].start_s + r.ops[id - 1].duration_s) << "op " << id;
  }
  EXPECT_TRUE(gpu.info()["attention_emulated"].get<bool>());
  EXPECT_GT(r.step_measured_s, 0);
}

TEST(GpuKernelCheck, AdamKernelMatchesTheCpuReference) {
  SKIP_WITHOUT_GPU();
  std::ostringstream log;
  const auto res = zg::run_kernel_check(20240607, log);
  EXPECT_EQ(res.failures, 0) << log.str();
  EXPECT_LE(res.max_rel_error, 1e-6);
  EXPECT_GT(res.cases, 100);
}

TEST(GpuBench, QuickBenchProducesAValidCalibration) {
  SKIP_WITHOUT_GPU();
  zv::ThreadWorld world(1, {{0}});
  auto boot = world.comm(0);
  zg::BenchOptions o;
  o.quick = true;
  o.max_coll_bytes = 1 << 20;
  o.adam_params = 1 << 22;
  o.copy_bytes = 1 << 26;
  const zv::Calibration c = zg::run_bench(*boot, 0, o);
  EXPECT_NO_THROW(zv::parse_calibration(zv::calibration_json(c)));
  EXPECT_GT(c.hbm_copy_GBps, 0);
  EXPECT_FALSE(c.collectives.empty());
}

}  // namespace
