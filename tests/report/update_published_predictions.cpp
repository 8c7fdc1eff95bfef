// The one way to change tests/report/published_predictions.json: simulates the bundled published
// runs of each pinned run (tests/report/published_predictions.h) and rewrites the table, printing
// every prediction that changed.
//
//   update_published_predictions [--check] [TABLE]   (default TABLE: the source tree's table)
//   cmake --build <build> --target update-published-predictions
//
// --check only reports: exit status 1 if any pinned value differs or any case is missing or
// extra. A rewrite changes predictions: say in the commit message which ones moved, and why.
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>

#include "tests/report/published_predictions.h"

int main(int argc, char** argv) {
  using namespace zerosim;
  using pinned::table_json;
  bool check = false;
  std::string path = pinned::default_path();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--check") == 0) {
      check = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "usage: update_published_predictions [--check] [TABLE]\n";
      return 0;
    } else {
      path = argv[i];
    }
  }
  try {
    table_json table;
    try {
      table = pinned::read_table(path);
    } catch (const std::exception&) {
      if (check) throw;
      table = table_json::object();  // a first write
    }
    table["format"] = "zerosim-published-predictions/1";
    table["about"] =
        "Pinned predictions of the bundled published runs (validate/cases): step time (s) and peak "
        "memory (GiB) per case; 'analytical' = every case on sim.network=analytical, 'flow' = the "
        "non-approximate cases of the default run on the default flow network. Compared exactly by "
        "tests/report/published_test.cpp; change only with update_published_predictions and say "
        "in the commit message which predictions moved and why.";
    int changed = 0, total = 0;
    for (const std::string& run : pinned::run_names()) {
      const table_json now = pinned::predictions_of(
          validate_published(pinned::cases_of(run), pinned::settings_of(run)));
      const table_json before = table.value(run, table_json::object());
      for (auto it = now.begin(); it != now.end(); ++it) {
        ++total;
        if (before.contains(it.key()) && before.at(it.key()) == it.value()) continue;
        ++changed;
        std::cout << run << " " << it.key() << ": "
                  << (before.contains(it.key()) ? before.at(it.key()).dump() : "(none)") << " -> "
                  << it.value().dump() << "\n";
      }
      for (auto it = before.begin(); it != before.end(); ++it) {
        if (now.contains(it.key())) continue;
        ++changed;
        std::cout << run << " " << it.key() << ": no longer a bundled case of this run\n";
      }
      table[run] = now;
    }
    if (check) {
      std::cout << changed << " of " << total << " pinned predictions differ from " << path
                << "\n";
      return changed == 0 ? 0 : 1;
    }
    if (changed > 0) {
      std::ofstream(path, std::ios::binary) << pinned::render(table);
      std::cout << "rewrote " << path << " (" << changed
                << " changed); say in the commit message which predictions moved and why\n";
    } else {
      std::cout << "no change\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "update_published_predictions: " << e.what() << "\n";
    return 2;
  }
}
