#pragma once
// The pinned tables of the test suite (tests/fingerprints/fingerprints.json,
// tests/report/published_predictions.json) read as ordered JSON, so that a rewrite keeps the
// entries in their order and a changed value is one changed line in review.
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace zerosim::testing_tables {

using table_json = nlohmann::ordered_json;

inline table_json read_table(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream text;
  text << in.rdbuf();
  return table_json::parse(text.str());
}

}  // namespace zerosim::testing_tables
