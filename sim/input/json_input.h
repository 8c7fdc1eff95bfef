#pragma once
// Parsing JSON that comes from the user. nlohmann::json parses recursively, so a document nested
// thousands of levels deep would overflow the stack; such input is refused first. Syntax errors
// and numbers beyond double (1e999) become InputError naming `key_path`.
//
// Inputs are also limited in size, before parsing: nlohmann's parse of a 100 MB document takes
// 5-10 s and several times its size in memory, and the scenario readers copy what they read
// (tests/edges, edgesLarge). Real inputs are small: Hugging Face config.json and DeepSpeed
// configs are a few kB, the published cases 100 kB; the largest in the repository, vTrain's
// 1,549 cases (validate/cases/vtrain.json, one a line), is 2.4 MB. 16 MiB is 7 times that,
// and a 16 MiB document of the worst shape measured (a cluster with ~1 million citation keys)
// still resolves in under 2 s and 0.5 GiB in a release build, inside the bound the edge tests
// hold every input to (5 s, 2 GiB); at 64 MiB the same shape takes 7 s and 1.6 GiB.
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim {

inline constexpr int kMaxJsonDepth = 256;
inline constexpr std::size_t kMaxJsonInputBytes = std::size_t{16} << 20;  // 16 MiB

// Parses `text`, refusing it (InputError naming `key_path` and `origin`, e.g. "'ds.json'") when
// it is longer than kMaxJsonInputBytes, nests deeper than kMaxJsonDepth or is not valid JSON.
// A key given twice in one object keeps its last value, as every JSON reader of the frameworks
// (Python's json) does; its path inside the document ("zero_optimization.stage", "[]" for an
// array's elements) goes to `repeated` when given, and is an InputError naming
// `key_path`.<path> when not: zerosim's own files refuse it, the frameworks' files are read as
// their frameworks read them and the caller says so.
nlohmann::json parse_json_text(const std::string& text, const std::string& key_path,
                               const std::string& origin,
                               std::vector<std::string>* repeated = nullptr);

// The whole of file `path`, read without ever holding more than kMaxJsonInputBytes + 1 bytes of
// it: a larger file is refused as soon as that much has been read, so that a huge file, a pipe
// or /dev/zero cannot exhaust memory or hang. `cannot_open` is the message when it cannot be
// opened ("" for "cannot open file 'PATH'").
std::string read_input_file(const std::string& path, const std::string& key_path,
                            const std::string& cannot_open = "");

// read_input_file + parse_json_text: what every reader of a user's JSON file should call.
nlohmann::json read_json_input_file(const std::string& path, const std::string& key_path,
                                    const std::string& cannot_open = "",
                                    std::vector<std::string>* repeated = nullptr);

// Dotted key paths ("zero.offload_param.device") inside a document. json_path_find: the value,
// or nullptr when a part is missing or not an object. json_path_create: the value, created (with
// the objects above it) when missing; a part that exists and is not an object is an InputError
// naming it, since writing below it would drop what the user wrote there.
const nlohmann::json* json_path_find(const nlohmann::json& doc, const std::string& path);
nlohmann::json& json_path_create(nlohmann::json& doc, const std::string& path);

}  // namespace zerosim
