#include "sim/input/json_input.h"

#include <fstream>
#include <set>

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
                               const std::string& origin, std::vector<std::string>* repeated) {
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
  // The open containers, each with the name it has in its parent ("[]" in an array) and, for an
  // object, the keys seen in it.
  struct Open {
    bool object = false;
    std::string name;
    std::set<std::string> keys;
  };
  std::vector<Open> open;
  std::string key;  // the last key read: the name of the value that follows it
  std::string first_repeat;
  auto path_of = [&](const std::string& last) {
    std::string p;
    for (std::size_t i = 1; i < open.size(); ++i)
      p += open[i].name == "[]" ? "[]" : (p.empty() ? "" : ".") + open[i].name;
    return p.empty() ? last : p + "." + last;
  };
  const nlohmann::json::parser_callback_t watch = [&](int, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::key:
        key = parsed.get<std::string>();
        if (!open.back().keys.insert(key).second) {
          const std::string p = path_of(key);
          if (repeated) repeated->push_back(p);
          else if (first_repeat.empty()) first_repeat = p;
        }
        break;
      case Event::object_start:
      case Event::array_start:
        open.push_back({event == Event::object_start,
                        open.empty() ? std::string() : open.back().object ? key : "[]",
                        {}});
        break;
      case Event::object_end:
      case Event::array_end: open.pop_back(); break;
      case Event::value: break;
    }
    return true;
  };
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text, watch);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(key_path, origin + " is not valid JSON: " + e.what());
  }
  if (!first_repeat.empty()) {
    throw InputError(key_join(key_path, first_repeat),
                     "given twice in " + origin + " (a JSON reader keeps only the last); keep one");
  }
  return doc;
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
                                    const std::string& cannot_open,
                                    std::vector<std::string>* repeated) {
  return parse_json_text(read_input_file(path, key_path, cannot_open), key_path,
                         "'" + path + "'", repeated);
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
