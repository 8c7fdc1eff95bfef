// Cluster presets and the `cluster` scenario object: every preset loads, is cited and round-trips;
// bad input names its key path; unit strings in overrides are parsed.
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>

#include "sim/cluster/cluster.h"
#include "sim/core/error.h"

namespace zerosim {
namespace {

using nlohmann::json;

const std::vector<std::string> kExpectedPresets = {
    "aws-p5-h100",    "deepseek-h800",      "dgx-2-v100",          "dgx-a100-40gb",
    "dgx-a100-80gb",  "dgx-b200",           "dgx-h100",            "dgx-h200",
    "gb200-nvl72",    "h100-pcie-80gb",     "jean-zay-a100-80gb",  "meta-h100-96gb-roce",
    "meta-h100-roce", "vtrain-a100-800g"};

ClusterSpec load(const json& j) { return cluster_from_json(j, "cluster"); }

// Runs cluster_from_json and returns the key path of the InputError it must throw.
std::string error_path(const json& j) {
  try {
    load(j);
  } catch (const InputError& e) {
    return e.key_path();
  }
  ADD_FAILURE() << "no InputError for " << j.dump();
  return "";
}

TEST(clusterPresets, AllExpectedPresetsAreEmbedded) {
  EXPECT_EQ(cluster_preset_names(), kExpectedPresets);
}

TEST(clusterPresets, EveryPresetLoadsWithSaneValues) {
  for (const auto& name : cluster_preset_names()) {
    SCOPED_TRACE(name);
    ClusterSpec c = load({{"preset", name}});
    EXPECT_EQ(c.preset, name);
    EXPECT_EQ(c.nodes, 1);
    EXPECT_FALSE(c.description.empty());
    EXPECT_EQ(c.description, cluster_preset_description(name));
    EXPECT_GT(c.gpu.peak_tflops(Precision::Fp16), 0);
    EXPECT_GT(c.gpu.gemm_efficiency, 0.5);
    EXPECT_LE(c.gpu.gemm_efficiency, 1.0);
    EXPECT_GT(c.gpu.hbm_efficiency, 0.5);
    EXPECT_LE(c.gpu.hbm_efficiency, 1.0);
    EXPECT_GT(c.gpu.hbm_bytes, 30LL << 30);
    EXPECT_GT(c.nvlink_bandwidth, 100e9);
    EXPECT_GT(c.nic_bandwidth, 10e9);
    EXPECT_GE(c.nvlink_domain_gpus, 1);
    EXPECT_GT(c.host.cpu_cores, 0);
    EXPECT_FALSE(c.nccl_version.empty());
  }
}

// Every value in a preset file carries a citation (or an ASSUMPTION label) under "sources".
TEST(clusterPresets, EveryValueHasASource) {
  for (const auto& name : cluster_preset_names()) {
    SCOPED_TRACE(name);
    json file = cluster_preset_json(name);
    const json& sources = file.at("sources");
    for (const auto& [key, value] : file.items()) {
      if (key == "description" || key == "sources") continue;
      if (value.is_object()) {
        for (const auto& [sub, subvalue] : value.items()) {
          std::string flat = key + "." + sub;
          ASSERT_TRUE(sources.contains(flat)) << flat;
          EXPECT_GT(sources.at(flat).get<std::string>().size(), 10u) << flat;
        }
      } else {
        ASSERT_TRUE(sources.contains(key)) << key;
        EXPECT_GT(sources.at(key).get<std::string>().size(), 10u) << key;
      }
    }
    // And nothing is cited that is not there (a typo in a sources key).
    for (const auto& [key, citation] : sources.items()) {
      auto dot = key.find('.');
      bool present = dot == std::string::npos
                         ? file.contains(key)
                         : file.contains(key.substr(0, dot)) &&
                               file.at(key.substr(0, dot)).contains(key.substr(dot + 1));
      EXPECT_TRUE(present) << "sources cites missing key " << key;
    }
  }
}

TEST(clusterPresets, PresetFilesAreAscii) {
  for (const auto& name : cluster_preset_names()) {
    std::string text = cluster_preset_json(name).dump();
    for (char ch : text) EXPECT_GE(static_cast<signed char>(ch), 0) << name;
  }
}

TEST(clusterPresets, RoundTripEveryPreset) {
  for (const auto& name : cluster_preset_names()) {
    SCOPED_TRACE(name);
    for (json size : {json{{"nodes", 4}}, json{{"num_gpus", 2}}, json::object()}) {
      json in = {{"preset", name}};
      in.update(size);
      ClusterSpec a = load(in);
      json out = cluster_to_json(a);
      ClusterSpec b = load(out);
      EXPECT_EQ(cluster_to_json(b), out);
      EXPECT_EQ(b.num_gpus(), a.num_gpus());
      EXPECT_EQ(b.nic_bandwidth, a.nic_bandwidth);
      EXPECT_EQ(b.gpu.hbm_bytes, a.gpu.hbm_bytes);
      // The same object read back as an inline cluster is the same spec too.
      json inline_obj = out;
      inline_obj["preset"] = "inline";
      json again = cluster_to_json(load(inline_obj));
      again["preset"] = out["preset"];
      EXPECT_EQ(again, out);
    }
  }
}

TEST(clusterPresets, RoundTripWithOverrides) {
  json in = {{"preset", "dgx-h100"}, {"nodes", 4}, {"nic_bandwidth", "800Gbps"},
             {"oversubscription", 2}, {"gpu", {{"hbm_bytes", "40GiB"}}}};
  json out = cluster_to_json(load(in));
  EXPECT_EQ(cluster_to_json(load(out)), out);
}

TEST(clusterSpec, InternodeBandwidthPerGpu) {
  // 8 x 200 Gb/s / 8 GPUs = 25 GB/s.
  EXPECT_DOUBLE_EQ(load({{"preset", "dgx-a100-80gb"}}).internode_bandwidth_per_gpu(), 25e9);
  // 32 x 100 Gb/s / 8 GPUs = 50 GB/s.
  EXPECT_DOUBLE_EQ(load({{"preset", "aws-p5-h100"}}).internode_bandwidth_per_gpu(), 50e9);
  // 4 x 200 Gb/s / 8 GPUs = 12.5 GB/s (half of dgx-a100-80gb).
  EXPECT_DOUBLE_EQ(load({{"preset", "vtrain-a100-800g"}}).internode_bandwidth_per_gpu(), 12.5e9);
  // 4 x 100 Gb/s / 8 GPUs.
  EXPECT_DOUBLE_EQ(load({{"preset", "jean-zay-a100-80gb"}}).internode_bandwidth_per_gpu(), 6.25e9);
  EXPECT_DOUBLE_EQ(load({{"preset", "dgx-h100"}}).internode_bandwidth_per_gpu(), 50e9);
}

TEST(clusterSpec, SizeFromNodesOrGpus) {
  EXPECT_EQ(load({{"preset", "dgx-h100"}, {"nodes", 4}}).num_gpus(), 32);
  ClusterSpec c = load({{"preset", "dgx-a100-80gb"}, {"num_gpus", 1024}});
  EXPECT_EQ(c.nodes, 128);
  EXPECT_EQ(c.gpus_per_node, 8);
  EXPECT_EQ(load({{"preset", "dgx-h100"}, {"nodes", 2}, {"num_gpus", 16}}).nodes, 2);
  // Fewer GPUs than a node: one partial node.
  ClusterSpec part = load({{"preset", "dgx-a100-80gb"}, {"num_gpus", 2}});
  EXPECT_EQ(part.nodes, 1);
  EXPECT_EQ(part.gpus_per_node, 2);
  EXPECT_EQ(part.num_gpus(), 2);
  EXPECT_EQ(part.nvlink_domain_gpus, 2);
  // DGX-2 has 16 GPUs per node.
  EXPECT_EQ(load({{"preset", "dgx-2-v100"}, {"num_gpus", 400}}).nodes, 25);
}

TEST(clusterSpec, Gb200NodeIsATrayAndDomainIsTheRack) {
  ClusterSpec one_rack = load({{"preset", "gb200-nvl72"}, {"num_gpus", 72}});
  EXPECT_EQ(one_rack.gpus_per_node, 4);
  EXPECT_EQ(one_rack.nodes, 18);
  EXPECT_EQ(one_rack.nvlink_domain_gpus, 72);
  EXPECT_DOUBLE_EQ(one_rack.internode_bandwidth_per_gpu(), 50e9);
  // The domain is capped by the job size, and stays 72 beyond one rack.
  EXPECT_EQ(load({{"preset", "gb200-nvl72"}, {"nodes", 4}}).nvlink_domain_gpus, 16);
  EXPECT_EQ(load({{"preset", "gb200-nvl72"}, {"num_gpus", 144}}).nvlink_domain_gpus, 72);
}

TEST(clusterSpec, PeakTflopsPerPrecision) {
  ClusterSpec a100 = load({{"preset", "dgx-a100-40gb"}});
  EXPECT_DOUBLE_EQ(a100.gpu.peak_tflops(Precision::Bf16), 312);
  EXPECT_DOUBLE_EQ(a100.gpu.peak_tflops(Precision::Tf32), 156);
  EXPECT_THROW(a100.gpu.peak_tflops(Precision::Fp8), std::invalid_argument);
  ClusterSpec h100 = load({{"preset", "dgx-h100"}});
  EXPECT_DOUBLE_EQ(h100.gpu.peak_tflops(Precision::Bf16), 989);
  EXPECT_DOUBLE_EQ(h100.gpu.peak_tflops(Precision::Fp8), 1979);
  EXPECT_NEAR(h100.gpu.gemm_efficiency, 794.5 / 989, 1e-3);
  ClusterSpec v100 = load({{"preset", "dgx-2-v100"}});
  EXPECT_DOUBLE_EQ(v100.gpu.peak_tflops(Precision::Fp16), 125);
  EXPECT_THROW(v100.gpu.peak_tflops(Precision::Bf16), std::invalid_argument);
  EXPECT_EQ(to_string(Precision::Bf16), "bf16");
}

// The Blackwell and H100 PCIe presets against the datasheet figures their sources cite (dense =
// half the datasheets' sparse tensor figures).
TEST(clusterPresets, DgxB200MatchesItsDatasheet) {
  const ClusterSpec c = load({{"preset", "dgx-b200"}});
  // HGX B200 per GPU: FP16/BF16 4.5 PFLOPS, TF32 2.2 PFLOPS, FP8 9 PFLOPS with sparsity; FP32 75.
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Bf16), 2250);
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Fp16), 2250);
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Tf32), 1100);
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Fp8), 4500);
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Fp32), 75);
  EXPECT_NEAR(c.gpu.gemm_efficiency, 1745.0 / 2250, 1e-3);  // MAMF, B200 SXM
  // DGX B200: 1,440 GB and 64 TB/s of HBM3e for 8 GPUs; 14.4 TB/s of NVLink.
  EXPECT_EQ(c.gpu.hbm_bytes, 180LL << 30);
  EXPECT_DOUBLE_EQ(c.gpu.hbm_bandwidth, 8e12);
  EXPECT_DOUBLE_EQ(8 * 2 * c.nvlink_bandwidth, 14.4e12);
  EXPECT_EQ(c.gpu.generation, GpuGeneration::Blackwell);
  EXPECT_TRUE(c.nvswitch);
  EXPECT_TRUE(c.nvls);
  EXPECT_EQ(c.nvlink_domain_gpus, 8);
  // 8 x 400 Gb/s ConnectX-7 for 8 GPUs; 2 x 56-core Xeon Platinum 8570; PCIe Gen5 x16.
  EXPECT_DOUBLE_EQ(c.internode_bandwidth_per_gpu(), 50e9);
  EXPECT_EQ(c.host.cpu_cores, 112);
  EXPECT_DOUBLE_EQ(c.pcie_bandwidth, 64e9);
}

TEST(clusterPresets, H100PcieMatchesItsDatasheet) {
  const ClusterSpec c = load({{"preset", "h100-pcie-80gb"}});
  // H100 PCIe: BF16 1,513, TF32 756, FP8 3,026 TFLOPS with sparsity; FP32 51; 2 TB/s HBM2e.
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Bf16), 756);
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Tf32), 378);
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Fp8), 1513);
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops(Precision::Fp32), 51);
  EXPECT_EQ(c.gpu.hbm_bytes, 80LL << 30);
  EXPECT_DOUBLE_EQ(c.gpu.hbm_bandwidth, 2e12);
  EXPECT_EQ(c.gpu.sm_count, 114);
  // NVLink bridge: 600 GB/s both directions to the one partner card; no NVSwitch, no NVLS.
  EXPECT_DOUBLE_EQ(c.nvlink_bandwidth, 300e9);
  EXPECT_FALSE(c.nvswitch);
  EXPECT_FALSE(c.nvls);
  EXPECT_EQ(c.nvlink_domain_gpus, 2);
  EXPECT_EQ(c.pcie_gen, 5);
  EXPECT_DOUBLE_EQ(c.pcie_bandwidth, 64e9);
  // 2-8-5: 4 compute NICs of 400 Gb/s for 8 GPUs = 200 Gb/s per GPU.
  EXPECT_DOUBLE_EQ(c.internode_bandwidth_per_gpu(), 25e9);
}

// GB200 NVL72 at rack scale: one 72-GPU NVLink5 domain at 1.8 TB/s per GPU (900 GB/s each way).
TEST(clusterPresets, Gb200Nvl72MatchesItsDatasheet) {
  const ClusterSpec rack = load({{"preset", "gb200-nvl72"}, {"num_gpus", 72}});
  EXPECT_EQ(rack.nvlink_domain_gpus, 72);
  EXPECT_DOUBLE_EQ(rack.nvlink_bandwidth, 900e9);
  EXPECT_DOUBLE_EQ(72 * 2 * rack.nvlink_bandwidth, 129.6e12);  // "130 TB/s" per rack
  EXPECT_DOUBLE_EQ(rack.gpu.peak_tflops(Precision::Bf16), 2500);
  EXPECT_DOUBLE_EQ(rack.gpu.peak_tflops(Precision::Fp32), 80);
  EXPECT_DOUBLE_EQ(rack.gpu.hbm_bandwidth, 8e12);
}

TEST(clusterSpec, UnitParsingOfOverrides) {
  ClusterSpec c = load({{"preset", "dgx-h100"},
                        {"nodes", 4},
                        {"nic_bandwidth", "800Gbps"},
                        {"nvlink_bandwidth", "600GB/s"},
                        {"nic_latency", "1.5us"},
                        {"oversubscription", 2},
                        {"gpu", {{"hbm_bytes", "80GiB"}, {"hbm_bandwidth", "2TB/s"}}},
                        {"host", {{"dram_bytes", "1TiB"}}}});
  EXPECT_DOUBLE_EQ(c.nic_bandwidth, 100e9);
  EXPECT_DOUBLE_EQ(c.nvlink_bandwidth, 600e9);
  EXPECT_DOUBLE_EQ(c.nic_latency, 1.5e-6);
  EXPECT_DOUBLE_EQ(c.oversubscription, 2.0);
  EXPECT_EQ(c.gpu.hbm_bytes, 80LL * 1024 * 1024 * 1024);
  EXPECT_DOUBLE_EQ(c.gpu.hbm_bandwidth, 2e12);
  EXPECT_EQ(c.host.dram_bytes, 1LL << 40);
  // Untouched nested fields keep the preset's values.
  EXPECT_DOUBLE_EQ(c.gpu.peak_tflops_bf16, 989);
  EXPECT_EQ(c.host.cpu_cores, 112);
  EXPECT_DOUBLE_EQ(c.internode_bandwidth_per_gpu(), 100e9);
  // A bandwidth without its unit is refused (400 could be B/s or Gb/s); zero needs none.
  EXPECT_THROW(load({{"preset", "dgx-h100"}, {"nic_bandwidth", 1e10}}), InputError);
  EXPECT_DOUBLE_EQ(load({{"preset", "dgx-h100"}, {"nic_bandwidth", "1e10B/s"}}).nic_bandwidth, 1e10);
  // Overridden values say so in sources; untouched ones keep the preset's citation.
  EXPECT_NE(c.sources->at("nic_bandwidth").get<std::string>().find("set by the scenario"),
            std::string::npos);
  EXPECT_NE(c.sources->at("gpu.hbm_bandwidth").get<std::string>().find("set by the scenario"),
            std::string::npos);
  EXPECT_EQ(c.sources->at("fabric"), cluster_preset_json("dgx-h100").at("sources").at("fabric"));
}

TEST(clusterSpec, BadInputsNameTheirKeyPath) {
  const json base = {{"preset", "dgx-h100"}};
  auto with = [&](const json& extra) {
    json j = base;
    j.update(extra);
    return j;
  };
  EXPECT_EQ(error_path(with({{"nic_bandwith", "400Gbps"}})), "cluster.nic_bandwith");
  EXPECT_EQ(error_path({{"preset", "dgx-h1000"}}), "cluster.preset");
  EXPECT_EQ(error_path({{"nodes", 2}}), "cluster.preset");
  EXPECT_EQ(error_path(with({{"nodes", 0}})), "cluster.nodes");
  EXPECT_EQ(error_path(with({{"nodes", -3}})), "cluster.nodes");
  EXPECT_EQ(error_path(with({{"nodes", 1.5}})), "cluster.nodes");
  EXPECT_EQ(error_path(with({{"nodes", "4"}})), "cluster.nodes");
  EXPECT_EQ(error_path(with({{"num_gpus", 12}})), "cluster.num_gpus");
  EXPECT_EQ(error_path(with({{"num_gpus", 0}})), "cluster.num_gpus");
  EXPECT_EQ(error_path(with({{"nodes", 2}, {"num_gpus", 32}})), "cluster.num_gpus");
  EXPECT_EQ(error_path(with({{"nodes", 2}, {"num_gpus", 4}})), "cluster.num_gpus");
  EXPECT_EQ(error_path(with({{"nic_bandwidth", "0Gbps"}})), "cluster.nic_bandwidth");
  EXPECT_EQ(error_path(with({{"nic_bandwidth", "-400Gbps"}})), "cluster.nic_bandwidth");
  EXPECT_EQ(error_path(with({{"nic_bandwidth", "400GiB"}})), "cluster.nic_bandwidth");
  EXPECT_EQ(error_path(with({{"nvlink_bandwidth", 0}})), "cluster.nvlink_bandwidth");
  EXPECT_EQ(error_path(with({{"pcie_bandwidth", "-1GB/s"}})), "cluster.pcie_bandwidth");
  EXPECT_EQ(error_path(with({{"oversubscription", 0.5}})), "cluster.oversubscription");
  EXPECT_EQ(error_path(with({{"nvlink_latency", "1.5 parsecs"}})), "cluster.nvlink_latency");
  EXPECT_EQ(error_path(with({{"fabric", "token-ring"}})), "cluster.fabric");
  EXPECT_EQ(error_path(with({{"topology", "torus"}})), "cluster.topology");
  EXPECT_EQ(error_path(with({{"gpus_per_node", 0}})), "cluster.gpus_per_node");
  EXPECT_EQ(error_path(with({{"nvswitch", false}})), "cluster.nvls");
  EXPECT_EQ(error_path(with({{"gpu", {{"hbm_bandwidth", "3TB"}}}})), "cluster.gpu.hbm_bandwidth");
  EXPECT_EQ(error_path(with({{"gpu", {{"peak_tflops_fp9", 1}}}})), "cluster.gpu.peak_tflops_fp9");
  EXPECT_EQ(error_path(with({{"gpu", {{"gemm_efficiency", 1.2}}}})), "cluster.gpu.gemm_efficiency");
  EXPECT_EQ(error_path(with({{"gpu", 5}})), "cluster.gpu");
  EXPECT_EQ(error_path(with({{"host", {{"dram_bytes", "-1GiB"}}}})), "cluster.host.dram_bytes");
  EXPECT_EQ(error_path(with({{"nvlink_domain_gpus", 3}})), "cluster.nvlink_domain_gpus");
  EXPECT_EQ(error_path(with({{"nodes", 2}, {"nics_per_node", 0}})), "cluster.nics_per_node");
  EXPECT_EQ(error_path(json::array()), "cluster");
  // Inline objects must be complete: a missing field is named.
  json inline_obj = cluster_to_json(load(base));
  inline_obj["preset"] = "inline";
  inline_obj.erase("nic_bandwidth");
  EXPECT_EQ(error_path(inline_obj), "cluster.nic_bandwidth");
  inline_obj = cluster_to_json(load(base));
  inline_obj["preset"] = "inline";
  inline_obj["gpu"].erase("sm_count");
  EXPECT_EQ(error_path(inline_obj), "cluster.gpu.sm_count");
}

// The generation each preset states is the one the GPU-name guesses it replaced gave, so that no
// prediction moved when the field was introduced.
TEST(clusterPresets, EveryPresetStatesItsGeneration) {
  const std::map<std::string, GpuGeneration> expected = {
      {"aws-p5-h100", GpuGeneration::Hopper},       {"deepseek-h800", GpuGeneration::Hopper},
      {"dgx-2-v100", GpuGeneration::Volta},
      {"dgx-a100-40gb", GpuGeneration::Ampere},     {"dgx-a100-80gb", GpuGeneration::Ampere},
      {"dgx-b200", GpuGeneration::Blackwell},       {"h100-pcie-80gb", GpuGeneration::Hopper},
      {"dgx-h100", GpuGeneration::Hopper},          {"dgx-h200", GpuGeneration::Hopper},
      {"gb200-nvl72", GpuGeneration::Blackwell},    {"jean-zay-a100-80gb", GpuGeneration::Ampere},
      {"meta-h100-96gb-roce", GpuGeneration::Hopper}, {"meta-h100-roce", GpuGeneration::Hopper},
      {"vtrain-a100-800g", GpuGeneration::Ampere}};
  ASSERT_EQ(expected.size(), cluster_preset_names().size());
  for (const auto& name : cluster_preset_names()) {
    SCOPED_TRACE(name);
    const ClusterSpec c = load({{"preset", name}});
    EXPECT_EQ(c.gpu.generation, expected.at(name));
    EXPECT_EQ(cluster_to_json(c)["gpu"]["generation"], to_string(expected.at(name)));
  }
}

// Overrides inherit the preset's generation (a renamed GPU stays what its preset says) or set
// their own, which is marked like any override; an inline cluster must state it.
TEST(clusterSpec, GenerationIsInheritedOverriddenOrRequired) {
  const ClusterSpec renamed = load({{"preset", "dgx-a100-80gb"}, {"gpu", {{"name", "H100-ish"}}}});
  EXPECT_EQ(renamed.gpu.generation, GpuGeneration::Ampere);
  const ClusterSpec moved =
      load({{"preset", "dgx-a100-80gb"}, {"gpu", {{"generation", "hopper"}}}});
  EXPECT_EQ(moved.gpu.generation, GpuGeneration::Hopper);
  EXPECT_NE(moved.sources->at("gpu.generation").get<std::string>().find("\"ampere\""),
            std::string::npos);

  json inline_obj = cluster_to_json(load({{"preset", "dgx-h100"}}));
  inline_obj["preset"] = "inline";
  inline_obj["gpu"].erase("generation");
  try {
    load(inline_obj);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "cluster.gpu.generation");
    EXPECT_NE(std::string(e.what()).find("volta, ampere, hopper, blackwell"), std::string::npos);
  }
  for (const json& bad : {json("Hopper"), json("h100"), json(9)}) {
    SCOPED_TRACE(bad.dump());
    try {
      load({{"preset", "dgx-h100"}, {"gpu", {{"generation", bad}}}});
      FAIL();
    } catch (const InputError& e) {
      EXPECT_EQ(e.key_path(), "cluster.gpu.generation");
      EXPECT_NE(std::string(e.what()).find("volta, ampere, hopper, blackwell"), std::string::npos);
    }
  }
}

TEST(clusterSpec, KeyPathIsBuiltFromTheCallersPath) {
  try {
    cluster_from_json({{"preset", "dgx-h100"}, {"nodes", 0}}, "scenarios[2].cluster");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "scenarios[2].cluster.nodes");
  }
}

TEST(clusterSpec, ErrorMessagesHelp) {
  try {
    load({{"preset", "dgx-h100"}, {"nic_bandwith", "400Gbps"}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("did you mean 'nic_bandwidth'"), std::string::npos);
  }
  try {
    load({{"preset", "dgx-h1000"}});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("dgx-h100"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("gb200-nvl72"), std::string::npos);
  }
  EXPECT_THROW(cluster_preset_description("nope"), InputError);
}

}  // namespace
}  // namespace zerosim
