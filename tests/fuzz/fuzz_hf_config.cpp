// Fuzz target: the Hugging Face config.json reader (model_from_hf_config). A config that reads
// must give a model whose derived quantities (parameter counts, GEMMs, FLOPs, activation bytes)
// compute without overflow or UB at every TP degree that divides it, and whose inline object form
// reads back to the same model.
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace zerosim;
  std::optional<fuzz::json> config = fuzz::parse_input(data, size);
  if (!config) return 0;
  fuzz::guarded("fuzz_hf_config", [&] {
    const ModelSpec m = model_from_hf_config(*config, "hf");
    validate_model(m, "model");
    (void)count_params(m);
    (void)model_flops_per_token(m);
    (void)logits_forward_flops(m, 1);
    for (std::int64_t tp : {1, 2, 8}) {
      if (m.num_attention_heads % tp != 0 || m.ffn_hidden_size % tp != 0) continue;
      (void)layer_forward_work(m, 1, tp, tp > 1, true);
      for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
        (void)activation_bytes_per_layer(m, 1, tp, tp > 1, r, false);
      }
    }
    const ModelSpec back = model_from_json(model_to_json(m), "model");
    if (!(back == m)) {
      std::fprintf(stderr,
                   "fuzz_hf_config: model_to_json does not read back to the same model:\n%s\n",
                   model_to_json(m).dump().c_str());
      std::abort();
    }
  });
  return 0;
}
