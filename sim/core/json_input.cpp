#include "sim/core/json_input.h"

#include "sim/core/error.h"

namespace zerosim {

nlohmann::json parse_json_text(const std::string& text, const std::string& key_path,
                               const std::string& origin) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        throw InputError(key_path, origin + " nests deeper than " + std::to_string(kMaxJsonDepth) +
                                       " levels");
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(key_path, origin + " is not valid JSON: " + e.what());
  }
}

}  // namespace zerosim
