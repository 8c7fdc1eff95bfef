#include "sim/input/quantity.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <utility>
#include <vector>

#include "sim/core/error.h"

namespace zerosim {
namespace {

using UnitTable = std::vector<std::pair<std::string, double>>;

const UnitTable& units_for(Dimension dim) {
  static const UnitTable bytes = {{"B", 1},        {"KB", 1e3},   {"MB", 1e6},
                                  {"GB", 1e9},     {"TB", 1e12},  {"KiB", 1024.0},
                                  {"MiB", 1048576.0}, {"GiB", 1073741824.0},
                                  {"TiB", 1099511627776.0}, {"K", 1024.0}, {"M", 1048576.0},
                                  {"G", 1073741824.0}};
  // Network rates in bits per second are decimal (400Gbps = 50e9 bytes/s).
  static const UnitTable bandwidth = {{"B/s", 1},      {"KB/s", 1e3},  {"MB/s", 1e6},
                                      {"GB/s", 1e9},   {"TB/s", 1e12}, {"GiB/s", 1073741824.0},
                                      {"bps", 0.125},  {"Kbps", 125.0}, {"Mbps", 1.25e5},
                                      {"Gbps", 1.25e8}, {"Tbps", 1.25e11}};
  static const UnitTable time = {{"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"ns", 1e-9},
                                 {"ps", 1e-12}};
  static const UnitTable count = {{"", 1}};
  switch (dim) {
    case Dimension::Bytes: return bytes;
    case Dimension::Bandwidth: return bandwidth;
    case Dimension::Time: return time;
    case Dimension::Count: return count;
  }
  return count;
}

std::string dimension_name(Dimension dim) {
  switch (dim) {
    case Dimension::Bytes: return "a size";
    case Dimension::Bandwidth: return "a bandwidth";
    case Dimension::Time: return "a time";
    case Dimension::Count: return "a number";
  }
  return "a value";
}

const char* example(Dimension dim) {
  switch (dim) {
    case Dimension::Bytes: return "\"80GiB\"";
    case Dimension::Bandwidth: return "\"400Gbps\" or \"25GB/s\"";
    case Dimension::Time: return "\"1.5us\"";
    case Dimension::Count: return "\"8\"";
  }
  return "";
}

std::string unit_list(Dimension dim) {
  std::vector<std::string> names;
  for (const auto& [name, scale] : units_for(dim)) names.push_back(name);
  return join_list(names);
}

double check_finite(double v, const std::string& key_path) {
  if (!std::isfinite(v)) throw InputError(key_path, "must be a finite number");
  return v;
}

}  // namespace

double parse_quantity_text(const std::string& text, Dimension dim, const std::string& key_path) {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  const char* begin = text.c_str() + i;
  char* end = nullptr;
  double number = std::strtod(begin, &end);
  if (end == begin) {
    throw InputError(key_path, "expected " + dimension_name(dim) + " such as " + example(dim) +
                                   ", got \"" + text + "\"");
  }
  std::string unit(end);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.front()))) unit.erase(0, 1);
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  check_finite(number, key_path);
  if (unit.empty()) {
    if (dim == Dimension::Count || number == 0) return number;
    throw InputError(key_path, dimension_name(dim) + " needs its unit, e.g. " + example(dim) +
                                   "; got \"" + text + "\" (accepted units: " + unit_list(dim) +
                                   ")");
  }
  for (const auto& [name, scale] : units_for(dim)) {
    if (name == unit) return check_finite(number * scale, key_path);
  }
  throw InputError(key_path, "unknown unit '" + unit + "' for " + dimension_name(dim) +
                                 "; allowed: " + unit_list(dim));
}

double parse_quantity(const nlohmann::json& value, Dimension dim, const std::string& key_path) {
  if (value.is_number()) {
    // Zero is zero in every unit ("no NVMe": nvme_bandwidth 0).
    if (dim == Dimension::Count || value.get<double>() == 0) {
      return check_finite(value.get<double>(), key_path);
    }
    throw InputError(key_path, dimension_name(dim) + " needs its unit, e.g. " + example(dim) +
                                   "; got " + value.dump() + " (accepted units: " +
                                   unit_list(dim) + ")");
  }
  if (value.is_string()) return parse_quantity_text(value.get<std::string>(), dim, key_path);
  throw InputError(key_path, "expected " + dimension_name(dim) + " (a number or a string with a unit), got " +
                                 std::string(value.type_name()));
}

std::string quantity_text(double value, Dimension dim) {
  const std::string number = nlohmann::json(value).dump();
  switch (dim) {
    case Dimension::Bytes: return number + "B";
    case Dimension::Bandwidth: return number + "B/s";
    case Dimension::Time: return number + "s";
    case Dimension::Count: return number;
  }
  return number;
}

}  // namespace zerosim
