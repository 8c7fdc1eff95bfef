#pragma once
// calibration.json, format "zerosim-calibration/1": what `zerosim-validate bench` measured on a
// machine, for `zerosim simulate --calibration FILE`. The schema (validate/README.md has it with
// units and the measurement behind each number):
//
//   { "format": "zerosim-calibration/1",
//     "gpu": "NVIDIA H200", "num_gpus": 8, "date": "2025-...", "cuda_runtime": "13.0",
//     "nccl_version": "2.28.9",
//     "gemm": [{"m", "n", "k", "dtype": "bf16"|"fp16", "tflops"}],
//     "hbm_copy_GBps", "h2d_GBps", "d2h_GBps",          GB = 1e9 bytes; copy counts read + write
//     "adam_params_per_s",
//     "adam": {"grad": "bf16", "copy": "bf16", "bytes_per_param", "GBps", "params"},
//     "collectives": [{"op": "all_reduce", "ranks", "bytes", "time_us", "algbw_GBps",
//                      "busbw_GBps"}] }                    nccl-tests' definitions (busbw.h)
//
// Readers must accept unknown keys (later versions add, never rename).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim::validate {

class CalibrationError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct GemmPoint {
  std::int64_t m = 0, n = 0, k = 0;
  std::string dtype;
  double tflops = 0;
};

struct CollectivePoint {
  std::string op;
  int ranks = 0;
  std::int64_t bytes = 0;
  double time_us = 0, algbw_GBps = 0, busbw_GBps = 0;
};

struct Calibration {
  std::string gpu;
  int num_gpus = 0;
  std::string date, cuda_runtime, nccl_version;
  std::vector<GemmPoint> gemm;
  double hbm_copy_GBps = 0, h2d_GBps = 0, d2h_GBps = 0, adam_params_per_s = 0;
  nlohmann::json adam = nlohmann::json::object();
  std::vector<CollectivePoint> collectives;
};

nlohmann::json calibration_json(const Calibration& c);
// Checks the format and every required key (types, values > 0 where a rate); throws
// CalibrationError naming the key path.
Calibration parse_calibration(const nlohmann::json& doc);

}  // namespace zerosim::validate
