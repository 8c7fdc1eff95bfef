#pragma once
// Parsing JSON that comes from the user. nlohmann::json parses recursively, so a document nested
// thousands of levels deep would overflow the stack; such input is refused first. Syntax errors
// and numbers beyond double (1e999) become InputError naming `key_path`.
#include <string>

#include <nlohmann/json.hpp>

namespace zerosim {

inline constexpr int kMaxJsonDepth = 256;

nlohmann::json parse_json_text(const std::string& text, const std::string& key_path,
                               const std::string& origin);

}  // namespace zerosim
