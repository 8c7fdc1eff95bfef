// calibration.json round trip and checks; bus bandwidth exactly as nccl-tests computes it.
#include <gtest/gtest.h>

#include "validate/busbw.h"
#include "validate/calibration.h"

namespace zv = zerosim::validate;

namespace {

// 1e9 bytes in 10 ms: algbw = 100 GB/s. Over 8 ranks busbw multiplies by 2 x 7/8 = 1.75 for
// all_reduce, 7/8 for all_gather / reduce_scatter / all_to_all, 1 for broadcast, reduce, send_recv.
TEST(BusBandwidth, NcclTestsDefinitions) {
  const auto ar = zv::nccl_tests_bandwidth(zv::CollKind::AllReduce, 8, 1'000'000'000, 0.01);
  EXPECT_DOUBLE_EQ(ar.algbw_GBps, 100.0);
  EXPECT_DOUBLE_EQ(ar.busbw_GBps, 175.0);
  EXPECT_DOUBLE_EQ(zv::nccl_tests_bandwidth(zv::CollKind::AllGather, 8, 1'000'000'000, 0.01).busbw_GBps, 87.5);
  EXPECT_DOUBLE_EQ(zv::nccl_tests_bandwidth(zv::CollKind::ReduceScatter, 8, 1'000'000'000, 0.01).busbw_GBps, 87.5);
  EXPECT_DOUBLE_EQ(zv::nccl_tests_bandwidth(zv::CollKind::AllToAll, 8, 1'000'000'000, 0.01).busbw_GBps, 87.5);
  EXPECT_DOUBLE_EQ(zv::nccl_tests_bandwidth(zv::CollKind::Broadcast, 8, 1'000'000'000, 0.01).busbw_GBps, 100.0);
  EXPECT_DOUBLE_EQ(zv::busbw_factor(zv::CollKind::AllReduce, 1), 0.0);
  EXPECT_THROW(zv::nccl_tests_bandwidth(zv::CollKind::AllReduce, 8, 1, 0.0), std::invalid_argument);
}

zv::Calibration sample() {
  zv::Calibration c;
  c.gpu = "NVIDIA H200";
  c.num_gpus = 8;
  c.date = "2025-01-01T00:00:00Z";
  c.gemm = {{8192, 8192, 8192, "bf16", 750.5}};
  c.hbm_copy_GBps = 4000;
  c.h2d_GBps = 50;
  c.d2h_GBps = 48;
  c.adam_params_per_s = 1.4e11;
  c.adam = {{"grad", "bf16"}, {"copy", "bf16"}, {"bytes_per_param", 28}};
  c.collectives = {{"all_reduce", 8, 1 << 30, 5000, 214.7, 375.8}};
  return c;
}

TEST(Calibration, RoundTrip) {
  const auto j = zv::calibration_json(sample());
  EXPECT_EQ(j["format"], "zerosim-calibration/1");
  const zv::Calibration back = zv::parse_calibration(j);
  EXPECT_EQ(back.gpu, "NVIDIA H200");
  ASSERT_EQ(back.gemm.size(), 1u);
  EXPECT_DOUBLE_EQ(back.gemm[0].tflops, 750.5);
  EXPECT_EQ(back.collectives[0].bytes, 1 << 30);
  EXPECT_DOUBLE_EQ(back.collectives[0].busbw_GBps, 375.8);
  EXPECT_DOUBLE_EQ(back.adam_params_per_s, 1.4e11);
  auto extra = j;
  extra["something_new"] = 1;  // readers accept keys added later
  EXPECT_NO_THROW(zv::parse_calibration(extra));
}

TEST(Calibration, ErrorsNameTheKey) {
  auto expect_error = [](nlohmann::json j, const std::string& path) {
    try {
      zv::parse_calibration(j);
      ADD_FAILURE() << "accepted a calibration with a bad " << path;
    } catch (const zv::CalibrationError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  };
  const auto good = zv::calibration_json(sample());
  auto j = good;
  j["format"] = "zerosim-calibration/2";
  expect_error(j, "calibration.format");
  j = good;
  j.erase("hbm_copy_GBps");
  expect_error(j, "hbm_copy_GBps");
  j = good;
  j["gemm"][0]["tflops"] = -1;
  expect_error(j, "calibration.gemm[0].tflops");
  j = good;
  j["gemm"][0]["dtype"] = "int4";
  expect_error(j, "calibration.gemm[0].dtype");
  j = good;
  j["collectives"][0]["op"] = "all_scatter";
  expect_error(j, "calibration.collectives[0].op");
}

}  // namespace
