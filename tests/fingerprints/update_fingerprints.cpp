// The one way to change tests/fingerprints/fingerprints.json: recomputes every scenario's
// fingerprint, event count and makespan and rewrites the table, printing each change.
//
//   update_fingerprints [--check] [TABLE]     (default TABLE: the source tree's table)
//   cmake --build <build> --target update-fingerprints
//
// --check only reports: exit status 1 if any pinned value differs. A rewrite is a trajectory
// change: say in the commit message, per changed scenario, why the simulated step changed.
#include <cstring>
#include <exception>
#include <iostream>

#include "tests/fingerprints/fingerprint_table.h"

int main(int argc, char** argv) {
  using namespace zerosim::fingerprints;
  bool check = false;
  std::string path = default_table_path();
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--check") == 0) {
      check = true;
    } else if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::cout << "usage: update_fingerprints [--check] [TABLE]\n";
      return 0;
    } else {
      path = argv[i];
    }
  }
  try {
    table_json table = read_table(path);
    int changed = 0;
    for (auto& e : table.at("scenarios")) {
      const std::string name = e.at("name").get<std::string>();
      const Pinned now = compute(nlohmann::json::parse(e.at("scenario").dump()));
      Pinned before;
      if (e.contains("fingerprint")) {
        before = {e.at("fingerprint").get<std::string>(), e.at("events").get<std::uint64_t>(),
                  e.at("makespan_ps").get<zerosim::SimTime>()};
      }
      if (now == before) continue;
      ++changed;
      std::cout << name << ": fingerprint "
                << (before.fingerprint.empty() ? "(none)" : before.fingerprint) << " -> "
                << now.fingerprint << ", events " << before.events << " -> " << now.events
                << ", makespan_ps " << before.makespan_ps << " -> " << now.makespan_ps << "\n";
      e["fingerprint"] = now.fingerprint;
      e["events"] = now.events;
      e["makespan_ps"] = now.makespan_ps;
    }
    if (check) {
      std::cout << changed << " of " << table.at("scenarios").size() << " scenarios differ from "
                << path << "\n";
      return changed == 0 ? 0 : 1;
    }
    if (changed > 0) {
      std::ofstream(path, std::ios::binary) << table.dump(1) << "\n";
      std::cout << "rewrote " << path << " (" << changed
                << " changed); explain every change in the commit message\n";
    } else {
      std::cout << "no change\n";
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "update_fingerprints: " << e.what() << "\n";
    return 2;
  }
}
