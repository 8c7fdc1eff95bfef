#include "sim/cluster/cluster.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <variant>

#include "sim/cluster/gpu_generation.h"
#include "sim/core/error.h"
#include "sim/input/quantity.h"

// Defined in the source that sim/cluster/CMakeLists.txt generates from topologies/*.json.
namespace zerosim::embedded {
std::size_t preset_count();
const char* preset_name(std::size_t i);
std::string preset_text(std::size_t i);
}  // namespace zerosim::embedded

namespace zerosim {

std::string to_string(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Tf32: return "tf32";
    case Precision::Fp16: return "fp16";
    case Precision::Bf16: return "bf16";
    case Precision::Fp8: return "fp8";
  }
  return "unknown";
}

double GpuSpec::peak_tflops(Precision p) const {
  double value = 0;
  switch (p) {
    case Precision::Fp32: value = peak_tflops_fp32; break;
    case Precision::Tf32: value = peak_tflops_tf32; break;
    case Precision::Fp16: value = peak_tflops_fp16; break;
    case Precision::Bf16: value = peak_tflops_bf16; break;
    case Precision::Fp8: value = peak_tflops_fp8; break;
  }
  // A zero peak in a preset means the hardware lacks the format (V100 has no bf16), so running
  // in it is a configuration error rather than something to simulate slowly.
  if (!(value > 0)) {
    throw std::invalid_argument(name + " has no " + to_string(p) + " tensor-core support");
  }
  return value;
}

namespace {

// ---------------------------------------------------------------------------------------------
// One table of fields per struct drives parsing, validation and serialisation, so that the
// three cannot drift apart and the list of valid keys for error messages is always complete.

enum class Kind { Text, Flag, Integer, Number, Bytes, Bandwidth, Time, Generation };
enum class Rule { Any, Positive, NonNegative, AtLeastOne, Fraction };

template <class S>
using Member = std::variant<std::string S::*, bool S::*, int S::*, std::int64_t S::*, double S::*,
                            GpuGeneration S::*>;

template <class S>
struct Field {
  const char* key;
  Kind kind;
  Rule rule;
  Member<S> member;
};

const std::vector<Field<GpuSpec>>& gpu_fields() {
  static const std::vector<Field<GpuSpec>> fields = {
      {"name", Kind::Text, Rule::Any, &GpuSpec::name},
      {"generation", Kind::Generation, Rule::Any, &GpuSpec::generation},
      {"peak_tflops_fp16", Kind::Number, Rule::Positive, &GpuSpec::peak_tflops_fp16},
      {"peak_tflops_bf16", Kind::Number, Rule::NonNegative, &GpuSpec::peak_tflops_bf16},
      {"peak_tflops_tf32", Kind::Number, Rule::NonNegative, &GpuSpec::peak_tflops_tf32},
      {"peak_tflops_fp8", Kind::Number, Rule::NonNegative, &GpuSpec::peak_tflops_fp8},
      {"peak_tflops_fp32", Kind::Number, Rule::Positive, &GpuSpec::peak_tflops_fp32},
      {"gemm_efficiency", Kind::Number, Rule::Fraction, &GpuSpec::gemm_efficiency},
      {"hbm_bytes", Kind::Bytes, Rule::Positive, &GpuSpec::hbm_bytes},
      {"hbm_bandwidth", Kind::Bandwidth, Rule::Positive, &GpuSpec::hbm_bandwidth},
      {"hbm_efficiency", Kind::Number, Rule::Fraction, &GpuSpec::hbm_efficiency},
      {"sm_count", Kind::Integer, Rule::AtLeastOne, &GpuSpec::sm_count},
  };
  return fields;
}

const std::vector<Field<HostSpec>>& host_fields() {
  static const std::vector<Field<HostSpec>> fields = {
      {"cpu_cores", Kind::Integer, Rule::AtLeastOne, &HostSpec::cpu_cores},
      {"dram_bandwidth", Kind::Bandwidth, Rule::Positive, &HostSpec::dram_bandwidth},
      {"dram_bytes", Kind::Bytes, Rule::Positive, &HostSpec::dram_bytes},
      // 0 means the node has no local NVMe.
      {"nvme_bandwidth", Kind::Bandwidth, Rule::NonNegative, &HostSpec::nvme_bandwidth},
      {"nvme_bytes", Kind::Bytes, Rule::NonNegative, &HostSpec::nvme_bytes},
  };
  return fields;
}

// Scalar fields of ClusterSpec. preset, description, gpu, host, nodes, num_gpus and sources are
// handled by hand because they are not plain hardware values.
const std::vector<Field<ClusterSpec>>& cluster_fields() {
  static const std::vector<Field<ClusterSpec>> fields = {
      {"gpus_per_node", Kind::Integer, Rule::AtLeastOne, &ClusterSpec::gpus_per_node},
      {"nvlink_bandwidth", Kind::Bandwidth, Rule::Positive, &ClusterSpec::nvlink_bandwidth},
      {"nvlink_latency", Kind::Time, Rule::NonNegative, &ClusterSpec::nvlink_latency},
      {"nvswitch", Kind::Flag, Rule::Any, &ClusterSpec::nvswitch},
      {"nvls", Kind::Flag, Rule::Any, &ClusterSpec::nvls},
      {"nvlink_domain_gpus", Kind::Integer, Rule::AtLeastOne, &ClusterSpec::nvlink_domain_gpus},
      // 0 NICs is allowed for a single-node system; checked against nodes below.
      {"nics_per_node", Kind::Integer, Rule::NonNegative, &ClusterSpec::nics_per_node},
      {"nic_bandwidth", Kind::Bandwidth, Rule::Positive, &ClusterSpec::nic_bandwidth},
      {"nic_latency", Kind::Time, Rule::NonNegative, &ClusterSpec::nic_latency},
      {"fabric", Kind::Text, Rule::Any, &ClusterSpec::fabric},
      {"topology", Kind::Text, Rule::Any, &ClusterSpec::topology},
      {"fabric_tiers", Kind::Integer, Rule::AtLeastOne, &ClusterSpec::fabric_tiers},
      {"oversubscription", Kind::Number, Rule::AtLeastOne, &ClusterSpec::oversubscription},
      {"pcie_gen", Kind::Integer, Rule::AtLeastOne, &ClusterSpec::pcie_gen},
      {"pcie_bandwidth", Kind::Bandwidth, Rule::Positive, &ClusterSpec::pcie_bandwidth},
      {"nccl_version", Kind::Text, Rule::Any, &ClusterSpec::nccl_version},
  };
  return fields;
}

const std::vector<std::string> kFabrics = {"infiniband", "roce", "efa", "omnipath"};
const std::vector<std::string> kTopologies = {"rail-fat-tree", "clos"};
// Keys of the cluster object that are not in cluster_fields().
const std::vector<std::string> kSpecialKeys = {"preset", "description", "gpu",     "host",
                                               "nodes",  "num_gpus",    "sources"};

template <class S>
std::vector<std::string> field_keys(const std::vector<Field<S>>& fields) {
  std::vector<std::string> keys;
  for (const auto& f : fields) keys.push_back(f.key);
  return keys;
}

std::vector<std::string> cluster_keys() {
  std::vector<std::string> keys = kSpecialKeys;
  for (const auto& k : field_keys(cluster_fields())) keys.push_back(k);
  return keys;
}

void reject_unknown_keys(const nlohmann::json& object, const std::vector<std::string>& allowed,
                         const std::string& key_path) {
  for (const auto& [key, value] : object.items()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw InputError(key_join(key_path, key), "unknown key" + did_you_mean(key, allowed) +
                                                    "; allowed: " + join_list(allowed));
    }
  }
}

void check_rule(double v, Rule rule, const std::string& path) {
  switch (rule) {
    case Rule::Any: return;
    case Rule::Positive:
      if (!(v > 0)) throw InputError(path, "must be greater than 0");
      // Rates (bytes/s, TFLOP/s) far below any hardware would make a step outlast simulated
      // time's range (int64 picoseconds, ~106 days); latencies above a second likewise.
      if (path.find("latency") != std::string::npos ? v > 1.0 : v < 1e-3) {
        throw InputError(path, path.find("latency") != std::string::npos
                                   ? "must be at most 1 s"
                                   : "is implausibly small (at least 1e-3 in its unit)");
      }
      return;
    case Rule::NonNegative:
      if (!(v >= 0)) throw InputError(path, "must not be negative");
      // A link latency (zero allowed: an ideal link) above a second is no network either.
      if (path.find("latency") != std::string::npos && v > 1.0) {
        throw InputError(path, "must be at most 1 s");
      }
      return;
    case Rule::AtLeastOne:
      if (!(v >= 1)) throw InputError(path, "must be at least 1");
      return;
    case Rule::Fraction:
      if (!(v > 0 && v <= 1)) throw InputError(path, "must be in (0, 1]");
      return;
  }
}

// A whole number given as a JSON number; "8" as a string or 8.5 are rejected so that a typo is
// not silently rounded.
std::int64_t parse_integer(const nlohmann::json& v, const std::string& path) {
  if (v.is_number_integer()) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9e15) {
      return static_cast<std::int64_t>(d);
    }
  }
  throw InputError(path, "expected a whole number, got " + v.dump());
}

int parse_int(const nlohmann::json& v, const std::string& path) {
  std::int64_t n = parse_integer(v, path);
  if (n > std::numeric_limits<int>::max() || n < std::numeric_limits<int>::min()) {
    throw InputError(path, "out of range: " + v.dump());
  }
  return static_cast<int>(n);
}

template <class S>
void parse_field(const Field<S>& f, const nlohmann::json& v, const std::string& path, S& out) {
  switch (f.kind) {
    case Kind::Text:
      if (!v.is_string()) throw InputError(path, "expected a string, got " + v.dump());
      out.*std::get<std::string S::*>(f.member) = v.get<std::string>();
      return;
    case Kind::Generation:
      if (!v.is_string()) {
        throw InputError(path, "expected one of " + join_list(gpu_generation_names()) + ", got " +
                                   v.dump());
      }
      out.*std::get<GpuGeneration S::*>(f.member) = parse_gpu_generation(v.get<std::string>(), path);
      return;
    case Kind::Flag:
      if (!v.is_boolean()) throw InputError(path, "expected true or false, got " + v.dump());
      out.*std::get<bool S::*>(f.member) = v.get<bool>();
      return;
    case Kind::Integer: {
      int n = parse_int(v, path);
      check_rule(n, f.rule, path);
      out.*std::get<int S::*>(f.member) = n;
      return;
    }
    case Kind::Bytes: {
      double b = parse_quantity(v, Dimension::Bytes, path);
      check_rule(b, f.rule, path);
      if (b > 9e18) throw InputError(path, "too large: " + v.dump());
      out.*std::get<std::int64_t S::*>(f.member) = std::llround(b);
      return;
    }
    case Kind::Number:
    case Kind::Bandwidth:
    case Kind::Time: {
      Dimension dim = f.kind == Kind::Bandwidth ? Dimension::Bandwidth
                      : f.kind == Kind::Time    ? Dimension::Time
                                                : Dimension::Count;
      double d = parse_quantity(v, dim, path);
      check_rule(d, f.rule, path);
      out.*std::get<double S::*>(f.member) = d;
      return;
    }
  }
}

template <class S>
nlohmann::json field_to_json(const Field<S>& f, const S& s) {
  return std::visit(
      [&](auto member) {
        if constexpr (std::is_same_v<decltype(member), GpuGeneration S::*>) {
          return nlohmann::json(to_string(s.*member));
        } else if constexpr (std::is_arithmetic_v<std::remove_reference_t<decltype(s.*member)>>) {
          // Sizes, bandwidths and times carry their unit, so the echo reads back.
          switch (f.kind) {
            case Kind::Bytes:
              return nlohmann::json(std::to_string(static_cast<long long>(s.*member)) + "B");
            case Kind::Bandwidth:
              return nlohmann::json(quantity_text(static_cast<double>(s.*member), Dimension::Bandwidth));
            case Kind::Time:
              return nlohmann::json(quantity_text(static_cast<double>(s.*member), Dimension::Time));
            default: return nlohmann::json(s.*member);
          }
        } else {
          return nlohmann::json(s.*member);
        }
      },
      f.member);
}

// Every field is required: presets and inline clusters must be complete, so nothing silently
// falls back to a default that no source backs.
template <class S>
S parse_struct(const nlohmann::json& object, const std::vector<Field<S>>& fields,
               const std::string& key_path) {
  if (!object.is_object()) {
    throw InputError(key_path, "expected an object, got " + std::string(object.type_name()));
  }
  reject_unknown_keys(object, field_keys(fields), key_path);
  S out{};
  for (const auto& f : fields) {
    std::string path = key_join(key_path, f.key);
    if (!object.contains(f.key)) {
      // Inline clusters written before the field existed fail here: say what it takes.
      throw InputError(path, f.kind == Kind::Generation
                                 ? "missing (every field is required): the GPU's architecture, "
                                   "one of " + join_list(gpu_generation_names())
                                 : "missing (every field is required)");
    }
    parse_field(f, object.at(f.key), path, out);
  }
  return out;
}

template <class S>
nlohmann::json struct_to_json(const S& s, const std::vector<Field<S>>& fields) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& f : fields) out[f.key] = field_to_json(f, s);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Embedded presets.

const std::map<std::string, nlohmann::json>& preset_table() {
  static const std::map<std::string, nlohmann::json> table = [] {
    std::map<std::string, nlohmann::json> t;
    for (std::size_t i = 0; i < embedded::preset_count(); ++i) {
      const std::string text = embedded::preset_text(i);
      std::string name = embedded::preset_name(i);
      try {
        t.emplace(name, nlohmann::json::parse(text));
      } catch (const nlohmann::json::parse_error& e) {
        // A build artifact, not user input: the preset tests catch this before release.
        throw std::logic_error("embedded preset topologies/" + name + ".json: " + e.what());
      }
    }
    return t;
  }();
  return table;
}

const nlohmann::json& preset_or_throw(const std::string& name, const std::string& key_path) {
  const auto& table = preset_table();
  auto it = table.find(name);
  if (it == table.end()) {
    std::vector<std::string> names = cluster_preset_names();
    throw InputError(key_path, "unknown preset '" + name + "'" + did_you_mean(name, names) +
                                   "; presets: " + join_list(names) +
                                   ", or \"inline\" with every field");
  }
  return it->second;
}

// Scenario values replace preset values key by key; "gpu", "host" and "sources" are merged one
// level deeper so that {"gpu": {"hbm_bytes": "40GiB"}} changes one GPU field only.
nlohmann::json merge_over_preset(const nlohmann::json& preset, const nlohmann::json& user) {
  nlohmann::json merged = preset;
  for (const auto& [key, value] : user.items()) {
    if (key == "preset") continue;
    bool nested = key == "gpu" || key == "host" || key == "sources";
    if (nested && value.is_object() && merged.contains(key) && merged[key].is_object()) {
      // From the user's copy, adding the preset's other keys: the same object, but a scenario's
      // thousands of citations are copied once instead of inserted one by one.
      nlohmann::json level = value;
      for (const auto& [sub, subvalue] : merged[key].items()) level.emplace(sub, subvalue);
      merged[key] = std::move(level);
    } else {
      merged[key] = value;
    }
  }
  return merged;
}

// Parses a complete cluster object (preset file, merged preset + overrides, or inline) except
// for the node count, which the caller resolves.
ClusterSpec parse_complete(const nlohmann::json& object, const std::string& key_path) {
  if (!object.is_object()) {
    throw InputError(key_path, "expected an object, got " + std::string(object.type_name()));
  }
  reject_unknown_keys(object, cluster_keys(), key_path);
  ClusterSpec c;
  for (const char* nested : {"gpu", "host"}) {
    if (!object.contains(nested)) {
      throw InputError(key_join(key_path, nested), "missing (every field is required)");
    }
  }
  c.gpu = parse_struct(object.at("gpu"), gpu_fields(), key_join(key_path, "gpu"));
  c.host = parse_struct(object.at("host"), host_fields(), key_join(key_path, "host"));
  for (const auto& f : cluster_fields()) {
    std::string path = key_join(key_path, f.key);
    if (!object.contains(f.key)) throw InputError(path, "missing (every field is required)");
    parse_field(f, object.at(f.key), path, c);
  }
  if (object.contains("description")) {
    const auto& d = object.at("description");
    if (!d.is_string()) throw InputError(key_join(key_path, "description"), "expected a string");
    c.description = d.get<std::string>();
  }
  if (object.contains("sources")) {
    const auto& s = object.at("sources");
    if (!s.is_object()) {
      throw InputError(key_join(key_path, "sources"), "expected an object of key -> citation");
    }
    c.sources = std::make_shared<const nlohmann::json>(s);
  } else {
    c.sources = std::make_shared<const nlohmann::json>(nlohmann::json::object());
  }
  if (std::find(kFabrics.begin(), kFabrics.end(), c.fabric) == kFabrics.end()) {
    throw InputError(key_join(key_path, "fabric"), "unknown fabric '" + c.fabric + "'" +
                                                       did_you_mean(c.fabric, kFabrics) +
                                                       "; allowed: " + join_list(kFabrics));
  }
  if (std::find(kTopologies.begin(), kTopologies.end(), c.topology) == kTopologies.end()) {
    throw InputError(key_join(key_path, "topology"),
                     "unknown topology '" + c.topology + "'" + did_you_mean(c.topology, kTopologies) +
                         "; allowed: " + join_list(kTopologies));
  }
  if (c.nvls && !c.nvswitch) {
    throw InputError(key_join(key_path, "nvls"), "NVLink SHARP needs an NVSwitch (nvswitch: true)");
  }
  if (c.nccl_version.empty()) {
    throw InputError(key_join(key_path, "nccl_version"), "must not be empty");
  }
  return c;
}

// The largest cluster zerosim simulates: 2^20 GPUs (64x today's largest training runs), so
// that every rank count, group and plan stays far inside 32-bit ids and memory.
constexpr std::int64_t kMaxGpus = std::int64_t{1} << 20;

// Sets nodes (and, for a partial node, gpus_per_node) from "nodes" / "num_gpus".
void resolve_size(const nlohmann::json& object, const std::string& key_path, ClusterSpec& c) {
  const std::string nodes_path = key_join(key_path, "nodes");
  const std::string gpus_path = key_join(key_path, "num_gpus");
  bool has_nodes = object.contains("nodes");
  bool has_gpus = object.contains("num_gpus");
  int nodes = 1;
  if (has_nodes) {
    nodes = parse_int(object.at("nodes"), nodes_path);
    if (nodes < 1) throw InputError(nodes_path, "must be at least 1");
  }
  // Checked before anything multiplies nodes by GPUs per node in int.
  if (static_cast<std::int64_t>(nodes) * c.gpus_per_node > kMaxGpus) {
    throw InputError(nodes_path, std::to_string(nodes) + " nodes x " +
                                     std::to_string(c.gpus_per_node) + " GPUs exceeds the " +
                                     std::to_string(kMaxGpus) + " GPUs zerosim simulates");
  }
  if (!has_gpus) {
    c.nodes = nodes;
    return;
  }
  int gpus = parse_int(object.at("num_gpus"), gpus_path);
  if (gpus < 1) throw InputError(gpus_path, "must be at least 1");
  if (gpus < c.gpus_per_node) {
    // Fewer GPUs than one node holds: one node with only those GPUs (e.g. vTrain's 2-8 GPU runs).
    if (has_nodes && nodes != 1) {
      throw InputError(gpus_path, std::to_string(gpus) + " GPUs is less than one node of " +
                                      std::to_string(c.gpus_per_node) + ", but nodes is " +
                                      std::to_string(nodes));
    }
    c.nodes = 1;
    c.gpus_per_node = gpus;
    return;
  }
  if (gpus % c.gpus_per_node != 0) {
    throw InputError(gpus_path, "must be a multiple of gpus_per_node (" +
                                    std::to_string(c.gpus_per_node) + ") or fewer than it, got " +
                                    std::to_string(gpus));
  }
  int implied = gpus / c.gpus_per_node;
  if (has_nodes && implied != nodes) {
    throw InputError(gpus_path, "inconsistent with nodes: " + std::to_string(nodes) + " nodes x " +
                                    std::to_string(c.gpus_per_node) + " GPUs = " +
                                    std::to_string(static_cast<std::int64_t>(nodes) * c.gpus_per_node) + ", not " +
                                    std::to_string(gpus));
  }
  c.nodes = implied;
}

void check_size(const ClusterSpec& c, const std::string& key_path) {
  if (static_cast<std::int64_t>(c.nodes) * c.gpus_per_node > kMaxGpus) {
    throw InputError(key_join(key_path, "nodes"),
                     std::to_string(c.nodes) + " nodes x " + std::to_string(c.gpus_per_node) +
                         " GPUs exceeds the " + std::to_string(kMaxGpus) + " GPUs zerosim simulates");
  }
  if (c.nodes > 1 && c.nics_per_node == 0) {
    throw InputError(key_join(key_path, "nics_per_node"),
                     "must be at least 1 when there is more than one node");
  }
  // A domain spans whole nodes (GB200: 18 trays of 4) or splits a node evenly.
  int d = c.nvlink_domain_gpus;
  if (d % c.gpus_per_node != 0 && c.gpus_per_node % d != 0) {
    throw InputError(key_join(key_path, "nvlink_domain_gpus"),
                     "must divide gpus_per_node (" + std::to_string(c.gpus_per_node) +
                         ") or be a multiple of it, got " + std::to_string(d));
  }
}

// Flat "a.b" -> value view of a cluster_to_json object's hardware fields, for marking overrides.
std::map<std::string, nlohmann::json> hardware_values(const nlohmann::json& j) {
  std::map<std::string, nlohmann::json> out;
  for (const auto& [key, value] : j.items()) {
    if (key == "gpu" || key == "host") {
      for (const auto& [sub, subvalue] : value.items()) out[key + "." + sub] = subvalue;
    } else if (key != "preset" && key != "description" && key != "sources" && key != "nodes" &&
               key != "num_gpus") {
      out[key] = value;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> cluster_preset_names() {
  std::vector<std::string> names;
  for (const auto& [name, json] : preset_table()) names.push_back(name);
  return names;  // std::map keeps them sorted
}

nlohmann::json cluster_preset_json(const std::string& name) {
  return preset_or_throw(name, "cluster.preset");
}

std::string cluster_preset_description(const std::string& name) {
  return preset_or_throw(name, "cluster.preset").value("description", std::string());
}

ClusterSpec cluster_from_json(const nlohmann::json& value, const std::string& key_path) {
  if (!value.is_object()) {
    throw InputError(key_path, "expected an object such as {\"preset\": \"dgx-h100\", \"nodes\": 4}, got " +
                                   std::string(value.type_name()));
  }
  reject_unknown_keys(value, cluster_keys(), key_path);
  const std::string preset_path = key_join(key_path, "preset");
  if (!value.contains("preset")) {
    throw InputError(preset_path, "missing; name a preset (" + join_list(cluster_preset_names()) +
                                      ") or \"inline\" with every field");
  }
  if (!value.at("preset").is_string()) throw InputError(preset_path, "expected a string");
  const std::string preset = value.at("preset").get<std::string>();

  ClusterSpec c;
  if (preset == "inline") {
    c = parse_complete(value, key_path);
    c.preset = "inline";
  } else {
    const nlohmann::json& base = preset_or_throw(preset, preset_path);
    nlohmann::json merged = merge_over_preset(base, value);
    c = parse_complete(merged, key_path);
    c.preset = preset;
    // Mark every hardware value that differs from the preset, unless the scenario cited it.
    nlohmann::json base_json = cluster_to_json(parse_complete(base, key_path));
    const auto user_cites = [&](const std::string& key) {
      return value.contains("sources") && value.at("sources").contains(key);
    };
    resolve_size(value, key_path, c);
    auto before = hardware_values(base_json);
    ClusterSpec hardware = c;
    hardware.sources = nullptr;  // only the hardware fields are compared
    // The citations are copied only when a mark is added; otherwise the parsed ones are shared.
    std::optional<nlohmann::json> marked;
    for (const auto& [key, now] : hardware_values(cluster_to_json(hardware))) {
      auto it = before.find(key);
      if (it != before.end() && it->second != now && !user_cites(key)) {
        if (!marked) marked = *c.sources;
        (*marked)[key] = "set by the scenario (preset " + preset + " has " + it->second.dump() + ")";
      }
    }
    if (marked) c.sources = std::make_shared<const nlohmann::json>(std::move(*marked));
  }
  if (preset == "inline") resolve_size(value, key_path, c);
  // A domain larger than the job is only as large as the job (GB200 with 16 GPUs: 16).
  c.nvlink_domain_gpus = std::min(c.nvlink_domain_gpus, c.num_gpus());
  check_size(c, key_path);
  return c;
}

nlohmann::json cluster_to_json(const ClusterSpec& c) {
  nlohmann::json j = nlohmann::json::object();
  j["preset"] = c.preset;
  j["description"] = c.description;
  j["nodes"] = c.nodes;
  j["num_gpus"] = c.num_gpus();
  j["gpu"] = struct_to_json(c.gpu, gpu_fields());
  j["host"] = struct_to_json(c.host, host_fields());
  for (const auto& f : cluster_fields()) j[f.key] = field_to_json(f, c);
  j["sources"] = c.sources ? *c.sources : nlohmann::json::object();
  return j;
}

}  // namespace zerosim
