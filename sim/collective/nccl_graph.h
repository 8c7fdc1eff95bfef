#pragma once
// NCCL's topology search replayed on the simulated cluster (layer 1 of nccl_model.h, first half):
// which NCCL nodes a communicator spans, how fast NCCL believes its links are, and the ring, tree
// and NVLS graphs (channels x per-channel GB/s) src/graph/search.cc would settle on. The tuner
// (nccl_tuning.h) reads nothing of the cluster but what is here.
#include <cstdint>
#include <span>
#include <vector>

#include "sim/cluster/cluster.h"
#include "sim/collective/nccl_constants.h"

namespace zerosim::nccl {

// NCCL's per-arch table row (VOLTA/AMPERE/HOPPER/BLACKWELL_COMPCAP_IDX) of the GPU's generation.
Arch arch_of(const GpuSpec& gpu);

// One of NCCL's graphs as its search would leave it: channels x per-channel GB/s.
struct GraphInfo {
  int n_channels = 0;
  double bw_intra = 0;  // GB/s per channel inside a node
  double bw_inter = 0;  // GB/s per channel across nodes
};

// A communicator as NCCL's topology search leaves it.
struct CommGraph {
  std::vector<std::int32_t> ranks;
  std::vector<int> node_index;     // per rank: index of its NCCL node (NVLink domain), 0..n_nodes-1
  std::vector<int> node_first;     // per node: first position of the node in `ranks`
  int n_ranks = 0;
  int n_nodes = 0;
  int ppn = 0;                     // most ranks of the communicator on one NCCL node
  int nics = 0;                    // NICs local to the communicator's GPUs, per node (min)
  Arch arch = Arch::Hopper;
  Hw intra_hw = Hw::NvLink;
  bool nvls_support = false;
  double nvlink_total = 0;         // NCCL GB/s of one GPU's NVLinks (links x per-link bw)
  double inter_max_bw = 0;         // NCCL GB/s of one GPU->NIC path (min(NIC, PCIe))
  double latency_inter_us = 0;     // graph latencyInter: network latency beyond NCCL's 2.7 us
  GraphInfo ring, tree, nvls;
  int comm_channels = 0;           // channels the kernels run on (ring graph x2, <= MAXCHANNELS)
  int nvls_channels = 0;
};

// The graphs NCCL builds over `ranks` (global GPU ranks in communicator order; NCCL's node is the
// NVLink domain). nvls_enable is NCCL_NVLS_ENABLE. Throws std::invalid_argument for a rank outside
// the cluster or given twice, InputError when the release has no rows for the GPU's generation or
// a group spanning nodes has no NICs.
CommGraph search_graphs(const ClusterSpec& cluster, std::span<const std::int32_t> ranks,
                        const Constants& k, bool nvls_enable);

}  // namespace zerosim::nccl
