// Fuzz target: the scenario reader. The input is a scenario document as `zerosim simulate
// SCENARIO.json` reads it. It is resolved (every key, every cross-key check), and simulated when
// it resolves to a small scenario (fuzz_common.h). Each of its leaf values is also fed through
// apply_setting ("section.key=value", the --set path) onto a small base scenario.
#include "tests/fuzz/fuzz_common.h"

namespace {

using zerosim::fuzz::json;

// "a.b.c" paths of the leaves of `doc`, with their values, at most `limit` of them.
void leaves(const json& node, const std::string& prefix,
            std::vector<std::pair<std::string, json>>& out, std::size_t limit) {
  if (out.size() >= limit) return;
  if (node.is_object() && !node.empty()) {
    for (auto it = node.begin(); it != node.end() && out.size() < limit; ++it) {
      leaves(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out, limit);
    }
  } else if (!prefix.empty()) {
    out.emplace_back(prefix, node);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::optional<json> doc = zerosim::fuzz::parse_input(data, size);
  if (!doc) return 0;
  zerosim::fuzz::confine_paths(*doc);
  zerosim::fuzz::guarded("fuzz_scenario", [&] {
    if (!doc->is_object()) return;  // the CLI rejects a non-object document itself
    zerosim::Scenario s = zerosim::resolve_scenario(*doc);
    zerosim::fuzz::simulate_if_small(s);
  });
  std::vector<std::pair<std::string, json>> sets;
  leaves(*doc, "", sets, 8);
  zerosim::fuzz::guarded("fuzz_scenario(--set)", [&] {
    // A small scenario (2 DGX H100 nodes, 2-layer model) so that most results get simulated.
    json base = {{"model",
                  {{"num_layers", 2},
                   {"hidden_size", 64},
                   {"num_attention_heads", 4},
                   {"vocab_size", 1000},
                   {"seq_length", 128}}},
                 {"cluster", {{"preset", "dgx-h100"}, {"nodes", 2}}},
                 {"training", {{"micro_batch_size", 1}, {"gradient_accumulation_steps", 2}}}};
    for (const auto& [path, value] : sets) {
      zerosim::apply_setting(
          base, path + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
    }
    zerosim::fuzz::confine_paths(base);
    zerosim::Scenario s = zerosim::resolve_scenario(base);
    zerosim::fuzz::simulate_if_small(s);
  });
  return 0;
}
