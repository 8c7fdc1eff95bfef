// Fuzz target: the DeepSpeed ds_config.json reader (apply_deepspeed_config). The config is merged
// into a small scenario (2-layer inline model, one DGX A100 node: dp = 8) as `--deepspeed` does,
// the result resolved and, when small, simulated.
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace zerosim;
  std::optional<fuzz::json> ds = fuzz::parse_input(data, size);
  if (!ds) return 0;
  fuzz::guarded("fuzz_deepspeed", [&] {
    ScenarioDocument doc;
    doc.doc = {{"model",
                       {{"num_layers", 2},
                        {"hidden_size", 64},
                        {"num_attention_heads", 8},
                        {"vocab_size", 1000},
                        {"seq_length", 128}}},
                      {"cluster", {{"preset", "dgx-a100-80gb"}, {"num_gpus", 8}}}};
    apply_deepspeed_config(doc, *ds, "ds_config.json");
    const Scenario s = resolve_scenario(doc);
    fuzz::simulate_if_small(s);
  });
  return 0;
}
