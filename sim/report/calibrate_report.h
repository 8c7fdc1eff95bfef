#pragma once
// `zerosim calibrate`'s results as a text table and as JSON (the same figures).
#include <string>

#include <nlohmann/json.hpp>

#include "sim/run/calibrate.h"

namespace zerosim {

nlohmann::json calibrate_json(const CalibrateResult& r);
std::string calibrate_text(const CalibrateResult& r);

}  // namespace zerosim
