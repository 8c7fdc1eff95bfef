#include "sim/input/json_input.h"

#include <fstream>

#include "sim/core/error.h"

namespace zerosim {

namespace {

// `size`: "100000000 bytes" when known, else "larger".
std::string too_large(const std::string& origin, const std::string& size) {
  return origin + " is " + size + " than the 16 MiB (" + std::to_string(kMaxJsonInputBytes) +
         " bytes) zerosim reads from one JSON input; real ones are kilobytes";
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& key_path,
                               const std::string& origin) {
  if (text.size() > kMaxJsonInputBytes) {
    throw InputError(key_path, too_large(origin, std::to_string(text.size()) + " bytes, more"));
  }
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

std::string read_input_file(const std::string& path, const std::string& key_path,
                            const std::string& cannot_open) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw InputError(key_path, cannot_open.empty() ? "cannot open file '" + path + "'" : cannot_open);
  }
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (text.size() > kMaxJsonInputBytes) {
      throw InputError(key_path, too_large("'" + path + "'", "larger"));
    }
  }
  if (in.bad()) throw InputError(key_path, "cannot read file '" + path + "'");
  return text;
}

nlohmann::json read_json_input_file(const std::string& path, const std::string& key_path,
                                    const std::string& cannot_open) {
  return parse_json_text(read_input_file(path, key_path, cannot_open), key_path,
                         "'" + path + "'");
}

const nlohmann::json* json_path_find(const nlohmann::json& doc, const std::string& path) {
  const nlohmann::json* node = &doc;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    if (!node->is_object()) return nullptr;
    auto it = node->find(path.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (it == node->end()) return nullptr;
    node = &*it;
    if (dot == std::string::npos) return node;
    start = dot + 1;
  }
}

nlohmann::json& json_path_create(nlohmann::json& doc, const std::string& path) {
  nlohmann::json* node = &doc;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = path.find('.', start);
    if (node->is_null()) *node = nlohmann::json::object();
    if (!node->is_object()) {
      const std::string here = start == 0 ? "scenario" : path.substr(0, start - 1);
      throw InputError(here, std::string("expected an object, got ") + node->type_name());
    }
    node = &(*node)[path.substr(start, dot == std::string::npos ? std::string::npos : dot - start)];
    if (dot == std::string::npos) return *node;
    start = dot + 1;
  }
}

}  // namespace zerosim
