#pragma once
// Values with units in scenario and topology files: "400Gbps", "25GB/s", "80GiB", "1.5us".
// A bare JSON number is taken in the base unit (bytes, bytes/s, seconds).
#include <string>

#include <nlohmann/json.hpp>

namespace zerosim {

enum class Dimension { Bytes, Bandwidth, Time, Count };

// Parses `value` (number or string with unit) of the given dimension; throws InputError naming
// key_path and the allowed units when the unit is wrong, the number malformed, NaN or infinite.
// Returns bytes, bytes/s, seconds, or a plain number.
double parse_quantity(const nlohmann::json& value, Dimension dim, const std::string& key_path);

// Same for a string alone (command-line values).
double parse_quantity_text(const std::string& text, Dimension dim, const std::string& key_path);

}  // namespace zerosim
