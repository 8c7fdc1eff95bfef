#pragma once
// The binding table: every scenario key, declared once (keys.cpp). Each entry says what the key
// is (type, unit, default, allowed values, help), where it lands in Scenario (read) and how its
// resolved value is written back (echo), and the other names it has: command-line shortcut
// flags, its path in a DeepSpeed ds_config.json, its path in a zerosim-published-cases/1 case.
// Cross-key rules (derived values, constraints between keys) are not in the table: they are the
// small named functions of resolve.cpp, one per section.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/scenario/scenario.h"

namespace zerosim {

// `--name VALUE` sets the key (a switch sets it to true). `sub` names a field of an object key
// (cluster.nodes for `--nodes`); empty for the key itself.
struct ScenarioFlag {
  std::string name;
  std::string sub;
  std::string help;
  bool is_switch = false;
};

struct KeySpec {
  std::string path;                  // "zero.reduce_bucket_size"
  std::string type;                  // "int", "bool", "enum", "count", "number", "ranks", "object"
  nlohmann::json default_value;      // null when derived from other keys (resolve.cpp)
  std::vector<std::string> allowed;  // enum values
  std::string help;
  std::string unit;                  // what a bare number means: "elements", "ranks", ...
  std::vector<ScenarioFlag> flags;
  std::string deepspeed;  // path in a ds_config.json, e.g. "zero_optimization.stage"
  std::string case_key;   // path in a published case, e.g. "parallel.zero_stage"
  // Reads a present value (or the default) into the scenario, throwing InputError naming `path`
  // when it is malformed or out of range. Keys are read in table order, so model and cluster
  // are known when later keys are read.
  std::function<void(const nlohmann::json& value, Scenario& s)> read;
  // The resolved value; null when the key is left out of the echo.
  std::function<nlohmann::json(const Scenario& s)> echo;

  KeySpec& flag(std::string name, std::string help, std::string sub = "") {
    flags.push_back({std::move(name), std::move(sub), std::move(help), false});
    return *this;
  }
  KeySpec& switch_flag(std::string name, std::string help) {
    flags.push_back({std::move(name), "", std::move(help), true});
    return *this;
  }
  KeySpec& in_deepspeed(std::string ds_path) {
    deepspeed = std::move(ds_path);
    return *this;
  }
  KeySpec& in_cases(std::string case_path) {
    case_key = std::move(case_path);
    return *this;
  }
};

const std::vector<KeySpec>& scenario_keys();
const KeySpec* find_key(const std::string& path);  // nullptr if not declared

// Every shortcut flag of the table with the key path it sets ("cluster.nodes" for --nodes).
struct BoundFlag {
  const ScenarioFlag* flag;
  std::string key;
};
std::vector<BoundFlag> scenario_flags();

}  // namespace zerosim
