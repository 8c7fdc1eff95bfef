// Helpers shared by the plan tests: a tiny model, scenarios on it, and cost models of fixed,
// hand-chosen durations so that timelines can be derived on paper.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/engine.h"
#include "sim/core/error.h"
#include "sim/parallel/training_plan.h"
#include "sim/scenario/scenario.h"

namespace zerosim::testing_plan {

using json = nlohmann::json;


// GPT-style (gelu: LayerNorm, learned positions, biases, tied embeddings, ffn = 4h), h = 64,
// L = 2, V = 1000, s = 128. Parameters (derived in tests/report/model_states_test.cpp):
//   embedding 72192, attention block 16768, MLP block 33216, final LayerNorm 128,
//   Φ = 72192 + 2 * (16768 + 33216) + 128 = 172288 (divisible by 2, 4, 8 and 16).
inline constexpr std::int64_t kTinyPhi = 172288;
inline json tiny_model() {
  return {{"num_layers", 2},
          {"hidden_size", 64},
          {"num_attention_heads", 4},
          {"vocab_size", 1000},
          {"seq_length", 128}};
}

inline json tiny_doc(int gpus, json zero, int gas = 1, int tp = 1) {
  return {{"model", tiny_model()},
          {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", gpus}}},
          {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", gas}}},
          {"parallel", {{"tp", tp}}},
          {"zero", std::move(zero)}};
}

// Llama 3 8B on one DGX H100 node under `framework` (ZeRO stage `stage`), the scenario the
// tests of each framework's layer code compare.
inline json llama8b_one_node(const std::string& framework, int stage, int micro_batch = 1,
                             bool torch_compile = false) {
  return {{"model", "llama3-8b"},
          {"cluster", {{"preset", "dgx-h100"}, {"nodes", 1}}},
          {"training", {{"micro_batch_size", micro_batch}, {"torch_compile", torch_compile}}},
          {"parallel", {{"framework", framework}}},
          {"zero", {{"stage", stage}}},
          {"sim", {{"allow_oom", true}}}};
}

// The key path resolve_scenario names for a bad document, or "(accepted)".
inline std::string input_error_key(const json& doc) {
  try {
    resolve_scenario(doc);
  } catch (const InputError& e) {
    return e.key_path();
  }
  return "(accepted)";
}

// The key path resolve_scenario names for `doc` after `edit`, or "(accepted)": refusal tests
// state a valid document once and each case as an edit of it.
inline std::string input_error_key(json doc, const std::function<void(json&)>& edit) {
  if (edit) edit(doc);
  return input_error_key(doc);
}

// Compute ops last a fixed number of microseconds per kind of work, times (rank + 1): rank 1
// is twice as slow as rank 0, so collectives visibly wait for their last member.
//   forward:  embedding 1, attention 2, MLP 3, head 4
//   backward: head 8, MLP 6, attention 4, embedding 2;  optimizer step 5
class FixedCompute : public ComputeModel {
 public:
  explicit FixedCompute(const TrainingPlan& tp, bool zero = false) : tp_(tp), zero_(zero) {}
  static SimTime micros(WorkKind k) {
    switch (k) {
      case WorkKind::EmbedForward:
        return 1;
      case WorkKind::AttentionForward:
        return 2;
      case WorkKind::MlpForward:
        return 3;
      case WorkKind::HeadForward:
        return 4;
      case WorkKind::HeadBackward:
        return 8;
      case WorkKind::MlpBackward:
        return 6;
      case WorkKind::AttentionBackward:
        return 4;
      case WorkKind::EmbedBackward:
        return 2;
      case WorkKind::OptimizerStep:
        return 5;
      case WorkKind::CpuOptimizerStep:
        return 20;
      case WorkKind::MoeForward:  // as before the kinds were named: no tiny model is MoE
      case WorkKind::MoeBackward:
        return 0;
      case WorkKind::HostToDevice:
      case WorkKind::DeviceToHost:
      case WorkKind::NvmeToDevice:
      case WorkKind::Quantize:
      case WorkKind::HostOverhead:
      case WorkKind::MtpForward:   // no tiny model has an MTP module
      case WorkKind::MtpBackward:
      case WorkKind::GradAccumulate:
        return 1;
    }
    return 0;
  }
  SimTime duration(const Plan& plan, OpId op) override {
    if (zero_) return 0;
    const Op& o = plan.ops[op];
    return micros(tp_.works.at(o.work).kind) * (o.rank + 1) * kPicosPerMicro;
  }

 private:
  const TrainingPlan& tp_;
  bool zero_;
};

// A collective ends a fixed time after its last member arrives: all-reduce 10 us, all-gather
// 6 us, reduce-scatter 5 us, anything else 3 us (or 0 for all with `zero`).
class FixedComm : public CommBackend {
 public:
  explicit FixedComm(bool zero = false) : zero_(zero) {}
  static SimTime micros(CollectiveKind k) {
    switch (k) {
      case CollectiveKind::AllReduce:
        return 10;
      case CollectiveKind::AllGather:
        return 6;
      case CollectiveKind::ReduceScatter:
        return 5;
      default:
        return 3;
    }
  }
  void start(const Plan& plan, std::uint32_t c, SimTime now) override {
    const SimTime d = zero_ ? 0 : micros(plan.collectives[c].kind) * kPicosPerMicro;
    pending_.insert({now + d, c});
  }
  SimTime next_completion() const override {
    return pending_.empty() ? kNever : pending_.begin()->first;
  }
  void pop_completed(SimTime now, std::vector<std::uint32_t>& done) override {
    while (!pending_.empty() && pending_.begin()->first == now) {
      done.push_back(pending_.begin()->second);
      pending_.erase(pending_.begin());
    }
  }

 private:
  bool zero_;
  std::set<std::pair<SimTime, std::uint32_t>> pending_;
};

}  // namespace zerosim::testing_plan
