// A key given twice in one JSON object: refused in zerosim's own files, collected (with its path
// in the document) for the frameworks' files, whose readers keep the last value.
#include "sim/input/json_input.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/core/error.h"

namespace zerosim {
namespace {

TEST(JsonInput, RepeatedKeysAreFoundWithTheirPaths) {
  const std::string text = R"({"zero": {"stage": 1, "stage": 3},
                               "cases": [{"id": "a"}, {"id": "b", "id": "c"}],
                               "top": 1, "top": 2})";
  std::vector<std::string> repeated;
  const nlohmann::json doc = parse_json_text(text, "scenario", "'s.json'", &repeated);
  EXPECT_EQ(repeated, (std::vector<std::string>{"zero.stage", "cases[].id", "top"}));
  EXPECT_EQ(doc["zero"]["stage"], 3);  // the last, as Python's json keeps it
  EXPECT_EQ(doc["cases"][1]["id"], "c");
  try {
    parse_json_text(text, "scenario", "'s.json'");
    ADD_FAILURE() << "a repeated key was accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "scenario.zero.stage");
  }
  // The same key in two objects is no repeat.
  repeated.clear();
  parse_json_text(R"({"a": {"k": 1}, "b": {"k": 2}, "k": 3})", "x", "'x'", &repeated);
  EXPECT_TRUE(repeated.empty());
}

}  // namespace
}  // namespace zerosim
