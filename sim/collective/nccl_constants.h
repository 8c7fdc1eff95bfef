#pragma once
// NCCL's tuning constants, one table per NCCL version, each value copied from NCCL's source at a
// release tag and cited there (nccl_constants.cpp). Only facts live here (numbers and which
// refinement a release applies); the formulas that read them are in nccl_graph.cpp and
// nccl_tuning.cpp.
//
// Versions carried, and the releases each one stands for:
//   V2_18  v2.18.5-1   releases up to 2.18 (older presets' 2.4 / 2.8 / 2.10 map here: their
//                      tables differ in details NCCL no longer ships; documented approximation)
//   V2_21  v2.21.5-1   2.19 to 2.24 (2.19/2.20 have NVLS hwLat 23 us and the older Hopper LL cap,
//                      2.23/2.24 already have the 2.25 tree latencies; see docs/NCCL_MODEL.md)
//   V2_27  v2.27.7-1   2.25 and later (adds Blackwell rows and PAT)
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace zerosim::nccl {

// NCCL's own orderings (src/include/device.h), so tables read like the source.
enum class Algo : std::uint8_t { Tree, Ring, CollNetDirect, CollNetChain, Nvls, NvlsTree, Pat };
inline constexpr int kNumAlgos = 7;
enum class Proto : std::uint8_t { LL, LL128, Simple };
inline constexpr int kNumProtos = 3;
// Hardware class of a hop, NCCL's NCCL_HW_NVLINK / NCCL_HW_PCI / NCCL_HW_NET.
enum class Hw : std::uint8_t { NvLink, Pci, Net };
inline constexpr int kNumHw = 3;
// Compute-capability rows of NCCL's per-arch tables (VOLTA/AMPERE/HOPPER/BLACKWELL_COMPCAP_IDX).
enum class Arch : std::uint8_t { Volta, Ampere, Hopper, Blackwell };
inline constexpr int kNumArch = 4;
enum class Version : std::uint8_t { V2_18, V2_21, V2_27 };

// An enum of NCCL's ordering as the index of its row in the tables below (and in CommInfo's).
template <class E>
  requires std::is_enum_v<E>
constexpr int idx(E e) {
  return static_cast<int>(e);
}

const char* algo_name(Algo a);    // "ring", "tree", "nvls", "nvls_tree", "pat", ...
const char* proto_name(Proto p);  // "LL", "LL128", "Simple"
const char* version_name(Version v);  // "2.18"
const char* arch_name(Arch a);

struct Constants {
  Version version = Version::V2_27;
  const char* tag = "";  // NCCL git tag the numbers were read from

  // src/graph/tuning.cc: latencies in microseconds.
  float base_lat[kNumAlgos][kNumProtos] = {};
  float hw_lat[kNumHw][kNumAlgos][kNumProtos] = {};
  // src/graph/tuning.cc: per-arch caps in GB/s. Row = Arch; column = index2 (1 node, 2 nodes,
  // more). llMaxBws' row for multi-node is picked by CPU vendor instead (0 Intel, 1 AMD).
  double ll_max_bw[kNumArch][3] = {};
  double per_ch_max_ring_ll128_bw[kNumArch][3] = {};
  double per_ch_max_tree_ll128_bw[kNumArch][3] = {};
  double per_ch_max_tree_bw[kNumArch][3] = {};
  bool has_arch[kNumArch] = {};  // false: the release has no row (e.g. Blackwell before 2.23)
  // src/graph/tuning.cc treeCorrectionFactor: per protocol, by log2(bytes / 64), 64 B .. 256 MiB.
  float tree_correction[kNumProtos][23] = {};

  // Model refinements that changed between releases (tuning.cc, ncclTopoTuneModel).
  double ring_ll_factor_allreduce = 0;   // busBw *= this for Ring/LL all-reduce, reduce, multi-node
  double ring_ll_factor_other = 0;       // ... and for the other single-node collectives
  double ring_ll128_factor = 0.92;       // 120/128
  double ring_ll128_factor_ppn1 = 0.92;  // 0.7 before 2.27 when fewer than 2 GPUs per node
  double tree_factor = 0.92;
  double tree_ll_factor = 1.0 / 3.8;
  double tree_ll128_factor_1node = 7.0 / 9.0;
  double tree_ll128_factor_multinode = 120.0 / 128.0;
  double tree_pattern_factor = 0.85;     // Hopper "simple tree" pattern
  double nvls_ratio = 5.0 / 6.0;         // NVLS / NVLS tree busBw -> algBw
  double pat_factor = 0.75;
  double plateau_factor = 1.4;           // Ring/Simple multi-node all-reduce, sm80+
  double plateau_factor_volta = 1.9;
  double net_overhead_intel_us = 1.0;    // getNetOverhead, x3 for Simple
  double net_overhead_amd_us = 2.0;
  // Which release behaviours apply.
  bool nvls_latency_is_intra = false;    // 2.19+: NVLS lat = hwLat[NVLINK][NVLS]; 2.18: baseLat
  bool nvls_bw_min_intra_inter = false;  // 2.19+: NVLS bw = min(bwIntra, bwInter)
  bool nvls_allgather_reducescatter = false;  // 2.19+: NVLS offered for AG / RS
  bool nvls_ag_rs_227_formula = false;   // 2.25+: AG/RS NVLS bw = min(intra*(ppn-1)/ppn, 0.9 inter), no ratio
  bool ring_inter_steps_227 = false;     // 2.25+: nInterSteps = 2(nNodes-1) / nNodes-1
  bool inter_lat_tree_when_ppn1 = false; // 2.25+: one GPU per node uses the Tree network latency
  bool pat = false;                      // 2.23+: PAT for AG / RS with one GPU per node
  bool ll128_blackwell = false;          // LL128 enabled on sm100
  // Which calls may use NVLS (src/enqueue.cc, nvlsSupport = ... ncclNvlsSupported(op, type)):
  bool nvls_allgather_any_type = false;  // 2.22+: all-gather passes the (op, type) check whatever the type
  bool fp8_types = false;                // 2.24+: ncclFloat8e4m3 / ncclFloat8e5m2 exist

  // src/graph/topo.h: NCCL's per-NVLink bandwidth (GB/s) by arch: SM70, SM80, SM90, SM100.
  double nvlink_bw_per_link[kNumArch] = {};
  // src/graph/search.cc: candidate per-channel bandwidths (GB/s), descending.
  std::vector<float> speed_intra[kNumArch];
  std::vector<float> speed_inter[kNumArch];

  // src/include/device.h, collectives.h, init.cc, transport/nvls.cc.
  int max_channels = 32;           // MAXCHANNELS
  int ring_graph_max_channels = 16;  // ringGraph.maxChannels = MAXCHANNELS/2
  int nvls_channels[kNumArch] = {};  // NVLS_NCHANNELS (single node) per arch
  int steps = 8;                   // NCCL_STEPS
  int chunk_steps = 4;             // ALLREDUCE/ALLGATHER/REDUCESCATTER_CHUNKSTEPS = NCCL_STEPS/2
  int slice_steps = 2;             // ..._SLICESTEPS = NCCL_STEPS/4
  std::int64_t simple_buffer_bytes = 4 << 20;  // DEFAULT_BUFFSIZE
  int simple_max_threads = 512;    // NCCL_SIMPLE_MAX_NTHREADS
  int ll_max_threads = 512;        // NCCL_LL_MAX_NTHREADS
  int ll128_max_threads = 640;     // NCCL_LL128_MAX_NTHREADS
  int max_threads = 640;           // NCCL_MAX_NTHREADS
  int ll_thread_threshold = 8;     // NCCL_LL_THREAD_THRESHOLD (x nRanks for Ring)
  int ll128_thread_threshold = 8;  // NCCL_LL128_THREAD_THRESHOLD
  int simple_thread_threshold = 64;  // NCCL_SIMPLE_THREAD_THRESHOLD
  double pci_bw = 12.0;            // PCI_BW, GB/s: rings slower than this get 256 Simple threads
};

const Constants& constants(Version v);

// "2.18", "2.18.5", "v2.27.7-1", ... -> the table that stands for that release (see above).
// Throws InputError(key_path) for anything that is not a 2.x version.
Version version_from_string(const std::string& text, const std::string& key_path);

}  // namespace zerosim::nccl
