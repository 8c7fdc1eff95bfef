// The CUDA kernel (kernels/adam_cuda.h) against the CPU reference (kernels/adam_cpu.h).
// Built only with the CUDA toolkit. The argument and error-macro tests run anywhere; the kernel
// tests skip, saying why, when no GPU is present.

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/adam_cpu.h"
#include "kernels/adam_cuda.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/half_convert.h"
#include "tests/kernels/adam_test_util.h"

#ifndef ZEROSIM_HAVE_CUDA
#error "test_adam_cuda.cpp needs zerosim::kernels_cuda (ZEROSIM_HAVE_CUDA)"
#endif

namespace zk = zerosim::kernels;
namespace zt = zerosim::kernels::test;
using zk::AdamMode;
using zk::DType;

namespace {

// ---- host-side checks: no GPU needed -----------------------------------------------------------

void expect_launch_rejected(zk::AdamShardView s, zk::AdamParams hp, const std::string& arg) {
  try {
    zk::launch_sharded_adam(s, hp);
    ADD_FAILURE() << "no exception for bad '" << arg << "'";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'" + arg + "'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("launch_sharded_adam"), std::string::npos) << e.what();
  }
}

TEST(AdamCudaArgs, RejectsBadArgumentsBeforeTouchingTheDevice) {
  // The checks run before any CUDA call, so these pointers are never dereferenced.
  alignas(16) static float buf[4][4];
  alignas(16) static std::uint16_t copy[4];
  const zk::AdamShardView ok{buf[0], buf[1], buf[2], buf[3], DType::F32, copy, DType::F16, 4};
  const zk::AdamParams hp;
  auto s = ok;
  s.n = -3;
  expect_launch_rejected(s, hp, "n");
  s = ok;
  s.exp_avg_sq = nullptr;
  expect_launch_rejected(s, hp, "exp_avg_sq");
  s = ok;
  s.grad_dtype = static_cast<DType>(4);
  expect_launch_rejected(s, hp, "grad_dtype");
  s = ok;
  s.param_dtype = DType::F32;
  expect_launch_rejected(s, hp, "param_dtype");
  auto bad = hp;
  bad.beta2 = 1.5f;
  expect_launch_rejected(ok, bad, "beta2");
  bad = hp;
  bad.eps = -1e-8f;
  expect_launch_rejected(ok, bad, "eps");
  bad = hp;
  bad.step = 0;
  expect_launch_rejected(ok, bad, "step");
}

TEST(AdamCudaArgs, EmptyShardLaunchesNothing) {
  EXPECT_NO_THROW(zk::launch_sharded_adam_async(zk::AdamShardView{}, zk::AdamParams{}, nullptr));
}

TEST(AdamCudaArgs, ErrorMacroNamesFileLineAndError) {
  try {
    ZEROSIM_CUDA_CHECK(cudaErrorInvalidValue);
    FAIL() << "no exception";
  } catch (const zk::CudaError& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), cudaErrorInvalidValue);
    EXPECT_NE(what.find("cudaErrorInvalidValue"), std::string::npos) << what;
    EXPECT_NE(what.find("test_adam_cuda.cpp:"), std::string::npos) << what;
  }
}

// ---- kernel against the CPU reference ----------------------------------------------------------

class AdamCudaGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    int count = 0;
    const cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      GTEST_SKIP() << "no usable CUDA device: cudaGetDeviceCount returned " << cudaGetErrorName(err)
                   << " (" << cudaGetErrorString(err) << ")";
    }
    if (count == 0) GTEST_SKIP() << "no CUDA device present";
  }
};

constexpr double kTol = 1e-6;
constexpr std::size_t kGuard = 8;
constexpr std::uint32_t kSentinelF32 = 0x7FBADBADu;
constexpr std::uint16_t kSentinel16 = 0xDEAD;

// Element offsets of each array inside its allocation: equal offsets take the scalar head and the
// vector body; unequal ones the all-scalar fallback.
struct Offsets {
  std::size_t master, m, v, grad, copy;
};

std::string describe(std::int64_t n, DType g, int copy, const Offsets& o) {
  return "n=" + std::to_string(n) + " grad=" + std::string(zk::to_string(g)) +
         " copy=" + (copy == 0 ? "none" : copy == 1 ? "f16" : "bf16") + " offsets=" +
         std::to_string(o.master) + "," + std::to_string(o.m) + "," + std::to_string(o.v) + "," +
         std::to_string(o.grad) + "," + std::to_string(o.copy);
}

// One step on the GPU from state `in`; the same step on the CPU; compares and returns the GPU's
// resulting state (so the next step starts where the GPU is).
zk::HostAdamShard gpu_step_and_compare(const zk::HostAdamShard& in, const zk::AdamParams& hp,
                                       int copy, const Offsets& o, cudaStream_t stream,
                                       const std::string& what) {
  const std::int64_t n = in.size();
  const auto un = static_cast<std::size_t>(n);
  const std::size_t gsize = zk::dtype_size(in.grad_dtype);
  const DType copy_dtype = copy == 1 ? DType::F16 : DType::BF16;
  const float sentinel = std::bit_cast<float>(kSentinelF32);

  auto staged = [&](const std::vector<float>& src, std::size_t off) {
    std::vector<float> h(un + kGuard, sentinel);
    std::copy(src.begin(), src.end(), h.begin() + static_cast<std::ptrdiff_t>(off));
    zk::DeviceBuffer<float> d(h.size());
    d.copy_from_host(h);
    return d;
  };
  zk::DeviceBuffer<float> d_master = staged(in.master, o.master);
  zk::DeviceBuffer<float> d_m = staged(in.exp_avg, o.m);
  zk::DeviceBuffer<float> d_v = staged(in.exp_avg_sq, o.v);
  std::vector<std::uint8_t> h_grad((un + kGuard) * gsize, 0xAB);
  std::copy(in.grad.begin(), in.grad.end(),
            h_grad.begin() + static_cast<std::ptrdiff_t>(o.grad * gsize));
  zk::DeviceBuffer<std::uint8_t> d_grad(h_grad.size());
  d_grad.copy_from_host(h_grad);
  std::vector<std::uint16_t> h_copy(un + kGuard, kSentinel16);
  zk::DeviceBuffer<std::uint16_t> d_copy(h_copy.size());
  d_copy.copy_from_host(h_copy);

  const zk::AdamShardView dev{d_master.data() + o.master, d_m.data() + o.m, d_v.data() + o.v,
                              d_grad.data() + o.grad * gsize, in.grad_dtype,
                              copy == 0 ? nullptr : d_copy.data() + o.copy, copy_dtype, n};
  if (stream == nullptr) {
    zk::launch_sharded_adam(dev, hp);
  } else {
    zk::launch_sharded_adam_async(dev, hp, stream);
    ZEROSIM_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  std::vector<float> g_master(un + kGuard), g_m(un + kGuard), g_v(un + kGuard);
  d_master.copy_to_host(g_master);
  d_m.copy_to_host(g_m);
  d_v.copy_to_host(g_v);
  d_copy.copy_to_host(h_copy);

  zk::HostAdamShard cpu = in;
  zk::sharded_adam_cpu(cpu.view(), hp);

  // Error scales from the textbook step (adam_test_util.h): relative error where nothing cancels.
  zt::TextbookAdam textbook(in);
  textbook.step(in, hp);
  std::vector<float> got_p(un), got_m(un), got_v(un);
  std::int64_t nan_count = 0;
  for (std::size_t i = 0; i < un; ++i) {
    got_p[i] = g_master[o.master + i];
    got_m[i] = g_m[o.m + i];
    got_v[i] = g_v[o.v + i];
    nan_count += std::isnan(got_p[i]) + std::isnan(got_m[i]) + std::isnan(got_v[i]);
  }
  const zt::Errs e = textbook.compare(got_p.data(), got_m.data(), got_v.data(), cpu.master.data(),
                                      cpu.exp_avg.data(), cpu.exp_avg_sq.data());
  EXPECT_EQ(nan_count, 0) << what;
  EXPECT_LE(e.p.value, kTol) << what << ": master, worst element " << e.p.index;
  EXPECT_LE(e.m.value, kTol) << what << ": exp_avg, worst element " << e.m.index;
  EXPECT_LE(e.v.value, kTol) << what << ": exp_avg_sq, worst element " << e.v.index;

  auto expect_guards = [&](const std::vector<float>& h, std::size_t off, const char* arr) {
    for (std::size_t i = 0; i < h.size(); ++i) {
      if (i >= off && i < off + un) continue;
      ASSERT_EQ(std::bit_cast<std::uint32_t>(h[i]), kSentinelF32) << what << " " << arr << " " << i;
    }
  };
  expect_guards(g_master, o.master, "master guard");
  expect_guards(g_m, o.m, "exp_avg guard");
  expect_guards(g_v, o.v, "exp_avg_sq guard");
  for (std::size_t i = 0; i < h_copy.size(); ++i) {
    const bool inside = copy != 0 && i >= o.copy && i < o.copy + un;
    if (!inside) {
      EXPECT_EQ(h_copy[i], kSentinel16) << what << ": copy written outside the span at " << i;
      continue;
    }
    const float p = g_master[o.master + (i - o.copy)];
    const std::uint16_t want = copy == 1 ? zk::float_to_half_bits(p) : zk::float_to_bf16_bits(p);
    if (h_copy[i] != want) {
      ADD_FAILURE() << what << ": copy element " << i - o.copy << " is 0x" << std::hex << h_copy[i]
                    << ", the rounded master is 0x" << want;
      break;
    }
  }

  zk::HostAdamShard out = in;
  out.master = std::move(got_p);
  out.exp_avg = std::move(got_m);
  out.exp_avg_sq = std::move(got_v);
  return out;
}

TEST_F(AdamCudaGpu, MatchesCpuReferenceEveryDtypeLengthAndAlignment) {
  const Offsets cases[] = {
      {0, 0, 0, 0, 0}, {1, 1, 1, 1, 1}, {2, 2, 2, 2, 2}, {3, 3, 3, 3, 3},  // head + vector body
      {0, 1, 2, 3, 1}, {1, 1, 1, 3, 1}, {2, 2, 2, 2, 0},                    // scalar fallback
  };
  for (DType g : {DType::F32, DType::F16, DType::BF16}) {
    for (std::int64_t n : {1, 3, 4, 5, 17, 1000003, (1 << 20) + 3}) {
      std::mt19937_64 rng(static_cast<std::uint64_t>(n) * 7 + static_cast<std::uint64_t>(g));
      zk::AdamParams hp;
      hp.weight_decay = 0.01f;
      hp.grad_scale = 1024.0f;
      hp.clip_coef = 0.5f;
      hp.step = 3;
      const zk::HostAdamShard in = zt::random_shard(n, g, hp.grad_scale, true, rng);
      for (int copy = 0; copy < 3; ++copy) {
        for (std::size_t c = 0; c < std::size(cases); ++c) {
          const Offsets& o = cases[c];
          hp.mode = (copy + c) % 2 == 0 ? AdamMode::AdamW : AdamMode::Adam;
          const std::string what =
              describe(n, g, copy, o) + (hp.mode == AdamMode::Adam ? " Adam" : " AdamW");
          gpu_step_and_compare(in, hp, copy, o, nullptr, what);
          if (HasFatalFailure()) return;
        }
      }
    }
  }
}

TEST_F(AdamCudaGpu, SeveralStepsOnAStream) {
  cudaStream_t stream{};
  ZEROSIM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  std::mt19937_64 rng(11);
  zk::AdamParams hp;
  hp.weight_decay = 0.1f;
  hp.grad_scale = 65536.0f;
  zk::HostAdamShard s = zt::random_shard((1 << 22) + 1, DType::BF16, hp.grad_scale, false, rng);
  for (hp.step = 1; hp.step <= 3; ++hp.step) {
    zt::fill_random_grad(s, hp.grad_scale, rng);
    s = gpu_step_and_compare(s, hp, 2, Offsets{0, 0, 0, 0, 0}, stream,
                             "step " + std::to_string(hp.step));
    if (HasFatalFailure()) break;
  }
  ZEROSIM_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
