#pragma once
// Small plans for the tests: written by hand (PlanBuilder) or produced by the simulator itself
// (simulated_plan), so the replay is tested on exactly what `zerosim plan` exports.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim::validate::test {

// A "zerosim-plan/1" document built op by op.
class PlanBuilder {
 public:
  explicit PlanBuilder(int num_ranks) : num_ranks_(num_ranks) {
    for (int r = 0; r < num_ranks; ++r) ranks_.push_back(nlohmann::json::array());
  }
  int group(const std::vector<int>& ranks, const std::string& kind = "dp") {
    const int id = static_cast<int>(groups_.size());
    groups_.push_back({{"id", id}, {"name", kind + std::to_string(id)}, {"kind", kind}, {"ranks", ranks}});
    return id;
  }
  int compute(int rank, const std::string& name, const std::string& stream = "compute",
              std::vector<int> deps = {}, double predicted_start = 0) {
    return add(rank, {{"kind", "compute"}, {"stream", stream}, {"name", name}, {"phase", "forward"},
                      {"deps", deps}, {"work", "mlp_forward"},
                      {"gemms", nlohmann::json::array({{{"name", "g"}, {"m", 8}, {"n", 8}, {"k", 8}, {"count", 1}}})},
                      {"predicted_start_s", predicted_start}, {"predicted_duration_s", 1e-3}});
  }
  int collective(int rank, const std::string& kind, int group, long long bytes,
                 const std::string& stream = "dp-comm", std::vector<int> deps = {},
                 double predicted_start = 0) {
    return add(rank, {{"kind", "collective"}, {"stream", stream}, {"name", kind}, {"phase", "communication"},
                      {"deps", deps}, {"collective", kind}, {"group", group}, {"bytes", bytes},
                      {"predicted_start_s", predicted_start}, {"predicted_duration_s", 2e-3}});
  }
  int add(int rank, nlohmann::json op) {
    const int id = static_cast<int>(ranks_[rank].size());
    op["id"] = id;
    ranks_[rank].push_back(std::move(op));
    return id;
  }
  nlohmann::json doc() const {
    nlohmann::json ranks = nlohmann::json::array();
    for (int r = 0; r < num_ranks_; ++r) ranks.push_back({{"rank", r}, {"ops", ranks_[r]}});
    return {{"format", "zerosim-plan/1"}, {"num_ranks", num_ranks_}, {"scenario", nlohmann::json::object()},
            {"groups", groups_}, {"ranks", ranks}};
  }

 private:
  int num_ranks_;
  nlohmann::json groups_ = nlohmann::json::array();
  std::vector<nlohmann::json> ranks_;
};

// A tiny transformer (2 layers, hidden 64) on dgx-h100 GPUs; `patch` is merged over it
// (JSON merge patch), e.g. {"zero": {"stage": 3}, "cluster": {"num_gpus": 4}}.
nlohmann::json tiny_scenario(const nlohmann::json& patch);
// `zerosim plan` of that scenario, every rank (sim.ranks = all where the simulator has the key);
// throws zerosim::InputError for scenarios the
// simulator refuses.
nlohmann::json simulated_plan(const nlohmann::json& scenario);

}  // namespace zerosim::validate::test
