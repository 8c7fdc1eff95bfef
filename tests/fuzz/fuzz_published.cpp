// Fuzz target: the published-case reader (format "zerosim-published-cases/1"). The input is a
// whole cases file, or one case (wrapped into a file of one case). Every case is turned into a
// scenario (case_scenario) and resolved; when every case that resolves is small (fuzz_common.h),
// the whole file also goes through validate_published and its three renderings.
#include "sim/report/published_report.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace zerosim;
  std::optional<fuzz::json> in = fuzz::parse_input(data, size);
  if (!in) return 0;
  fuzz::json doc = *in;
  if (doc.is_object() && !doc.contains("cases") && doc.contains("id")) {
    doc = {{"format", "zerosim-published-cases/1"}, {"cases", fuzz::json::array({doc})}};
  }
  bool all_small = true;
  if (doc.is_object() && doc.contains("cases") && doc["cases"].is_array()) {
    auto& cases = doc["cases"];
    for (std::size_t i = 0; i < cases.size(); ++i) {
      if (cases[i].is_object()) fuzz::confine_paths(cases[i]);
      fuzz::guarded("fuzz_published(case)", [&] {
        const Scenario s =
            resolve_scenario(case_scenario(cases[i], "cases[" + std::to_string(i) + "]"));
        if (!fuzz::small_enough(s)) all_small = false;
      });
    }
  }
  if (!all_small) return 0;
  fuzz::guarded("fuzz_published", [&] {
    const PublishedSummary summary = validate_published(doc);
    (void)published_json(summary).dump();
    (void)published_text(summary);
    (void)published_markdown(summary);
  });
  return 0;
}
