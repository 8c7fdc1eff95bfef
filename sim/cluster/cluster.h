#pragma once
// Cluster description: GPU, node and fabric specs, read from the JSON files in topologies/
// (compiled into the binary) or from a user's file. Every number in a preset carries a source.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace zerosim {

enum class Precision { Fp32, Tf32, Fp16, Bf16, Fp8 };
std::string to_string(Precision p);

// The GPU's architecture generation, as its preset states it (`gpu.generation`). What differs by
// generation (NCCL's table rows, kernel rates: sim/cluster/gpu_generation.h) keys on this, never
// on the GPU's name.
enum class GpuGeneration : std::uint8_t { Volta, Ampere, Hopper, Blackwell };
std::string to_string(GpuGeneration g);  // "volta", "ampere", "hopper", "blackwell"

struct GpuSpec {
  std::string name;                 // "A100-SXM4-80GB"
  GpuGeneration generation = GpuGeneration::Hopper;  // always set by cluster_from_json
  double peak_tflops_fp16 = 0;      // dense tensor-core peak
  double peak_tflops_bf16 = 0;
  double peak_tflops_tf32 = 0;
  double peak_tflops_fp8 = 0;       // 0 when the GPU has no FP8 tensor cores
  double peak_tflops_fp32 = 0;      // non-tensor (CUDA-core) FP32 peak, what Precision::Fp32 means
  double gemm_efficiency = 0;       // best achievable GEMM / peak (MAMF), 0..1
  std::int64_t hbm_bytes = 0;
  double hbm_bandwidth = 0;         // bytes/s, spec
  double hbm_efficiency = 0;        // achievable copy bandwidth / spec, 0..1
  int sm_count = 0;
  double peak_tflops(Precision p) const;  // throws std::invalid_argument if the GPU lacks it
};

struct HostSpec {
  int cpu_cores = 0;                // per node
  double dram_bandwidth = 0;        // bytes/s per node
  std::int64_t dram_bytes = 0;      // per node
  double nvme_bandwidth = 0;        // bytes/s per node, 0 if none
  std::int64_t nvme_bytes = 0;      // NVMe capacity per node, 0 if none
};

struct ClusterSpec {
  std::string preset;               // file stem in topologies/, or "inline"
  std::string description;
  GpuSpec gpu;
  HostSpec host;
  int nodes = 1;
  int gpus_per_node = 8;

  // Scale-up domain (NVLink / NVSwitch), per GPU, per direction.
  double nvlink_bandwidth = 0;      // bytes/s
  double nvlink_latency = 0;        // seconds
  bool nvswitch = true;
  bool nvls = false;                // NVLink SHARP available (NVSwitch gen3+)
  int nvlink_domain_gpus = 8;       // GPUs sharing one NVLink domain (72 for GB200 NVL72)

  // Scale-out fabric, per node.
  int nics_per_node = 0;
  double nic_bandwidth = 0;         // bytes/s per NIC per direction
  double nic_latency = 0;           // seconds, one hop NIC to NIC through the fabric
  std::string fabric = "infiniband";  // infiniband, roce, efa, omnipath
  std::string topology = "rail-fat-tree";  // rail-fat-tree, clos
  int fabric_tiers = 2;
  double oversubscription = 1.0;    // >= 1

  // Host link.
  int pcie_gen = 4;
  double pcie_bandwidth = 0;        // bytes/s per GPU per direction

  std::string nccl_version;         // the NCCL the published runs on this system used
  // key -> citation, as in the preset file. Shared and frozen once parsed: a cluster is copied
  // into every engine and network model, and a scenario may cite a megabyte of sources.
  std::shared_ptr<const nlohmann::json> sources;

  int num_gpus() const { return nodes * gpus_per_node; }
  // Inter-node bandwidth available to one GPU: the node's NICs shared by its GPUs, bytes/s.
  double internode_bandwidth_per_gpu() const {
    return nic_bandwidth * nics_per_node / gpus_per_node;
  }
};

std::vector<std::string> cluster_preset_names();

// The preset file topologies/<name>.json exactly as compiled into the binary (with its
// description and sources), and its one-line description for `zerosim list clusters`.
// Both throw InputError (key path "cluster.preset") for an unknown name.
nlohmann::json cluster_preset_json(const std::string& name);
std::string cluster_preset_description(const std::string& name);

// The `cluster` object of a scenario: {"preset": name, "nodes": n} or {"preset": name,
// "num_gpus": g}, with any ClusterSpec field overridable by key (e.g. "nic_bandwidth": "400Gbps";
// GPU and host fields inside "gpu" / "host" objects, merged key by key). {"preset": "inline", ...}
// gives every field itself. num_gpus must be a multiple of gpus_per_node, except that fewer GPUs
// than one node holds mean one partial node (nodes = 1, gpus_per_node = num_gpus).
// nvlink_domain_gpus is capped at num_gpus. Overridden fields get a "sources" entry saying so.
// gpu.generation follows the same rule: a preset's overrides inherit it (a renamed GPU keeps its
// preset's generation unless "generation" is overridden too); an inline cluster must state it.
// Throws InputError with the key path on any bad value.
ClusterSpec cluster_from_json(const nlohmann::json& value, const std::string& key_path);

// The fully resolved cluster as a JSON object that cluster_from_json reads back to the same spec.
nlohmann::json cluster_to_json(const ClusterSpec& c);

}  // namespace zerosim
