#pragma once
// Values with units in scenario and topology files: "400Gbps", "25GB/s", "80GiB", "1.5us". A size,
// a bandwidth or a time must carry its unit: a bare 400 could be bytes/s or Gb/s, and taking it
// in the base unit turned `--set cluster.nic_bandwidth=400` into 400 B/s. Counts are bare numbers.
#include <string>

#include <nlohmann/json.hpp>

namespace zerosim {

enum class Dimension { Bytes, Bandwidth, Time, Count };

// Parses `value` (a string with its unit; a plain number for Dimension::Count) of the given
// dimension; throws InputError naming key_path and the accepted forms when the unit is missing or
// wrong, the number malformed, NaN or infinite. Returns bytes, bytes/s, seconds, or a number.
double parse_quantity(const nlohmann::json& value, Dimension dim, const std::string& key_path);

// `value` (bytes, bytes/s, seconds) written so that parse_quantity reads it back exactly: the
// shortest decimal of the double and the base unit, e.g. "50000000000.0B/s", "2.7e-06s".
std::string quantity_text(double value, Dimension dim);

// Same for a string alone (command-line values).
double parse_quantity_text(const std::string& text, Dimension dim, const std::string& key_path);

}  // namespace zerosim
