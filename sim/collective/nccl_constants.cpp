#include "sim/collective/nccl_constants.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "sim/core/error.h"

// Every number below was read from https://github.com/NVIDIA/nccl at the tag named in the
// table's `tag`, file and symbol given in the comment above it. Row and column orders follow the
// source: algorithms Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree (, PAT); protocols
// LL, LL128, Simple; hardware NVLink, PCI, NET.

namespace zerosim::nccl {

namespace {

// src/graph/tuning.cc, treeCorrectionFactor: unchanged from 2.18.5 to 2.27.7.
constexpr float kTreeCorrection[kNumProtos][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9}};

// Copies a (multi-dimensional) array of the same type and shape.
template <class T>
void copy_array(T& dst, const T& src) {
  static_assert(std::is_array_v<T> && std::is_trivially_copyable_v<T>);
  std::memcpy(&dst, &src, sizeof(T));
}

Constants make_common() {
  Constants c;
  copy_array(c.tree_correction, kTreeCorrection);
  // src/graph/search.cc speedArrayIntra / speedArrayInter (pre-Hopper rows), unchanged
  // 2.18.5 .. 2.27.7.
  const std::vector<float> intra = {40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0,
                                    9.0,  7.0,  6.0,  5.0,  4.0,  3.0};
  const std::vector<float> inter = {48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0,
                                    7.0,  6.0,  5.0,  4.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  c.speed_intra[0] = c.speed_intra[1] = intra;
  c.speed_inter[0] = c.speed_inter[1] = inter;
  // src/graph/topo.h SM70_NVLINK_BW, SM80_NVLINK_BW (20.0 in every version carried).
  c.nvlink_bw_per_link[0] = 20.0;
  c.nvlink_bw_per_link[1] = 20.0;
  c.has_arch[0] = c.has_arch[1] = c.has_arch[2] = true;
  return c;
}

Constants make_v2_18() {
  Constants c = make_common();
  c.version = Version::V2_18;
  c.tag = "v2.18.5-1";
  // src/graph/tuning.cc baseLat (v2.18.5-1).
  const float base[kNumAlgos][kNumProtos] = {
      {6.8f, 14.0f, 0}, {6.6f, 14.0f, 8.4f},   // Tree, Ring
      {6.8f, 14.0f, 0}, {6.8f, 14.0f, 0},      // CollNet Direct, Chain
      {0, 0, 23.0f},    {0, 0, 23.0f},         // NVLS, NVLS Tree
      {0, 0, 0}};                              // (no PAT in 2.18)
  copy_array(c.base_lat, base);
  // src/graph/tuning.cc hwLat (v2.18.5-1).
  const float hw[kNumHw][kNumAlgos][kNumProtos] = {
      {{.6f, 1.25f, 4}, {.6f, 1.9f, 3.4f}, {0, 0, 8.0f}, {0, 0, 4.75f}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
      {{1.0f, 1.9f, 6}, {1.0f, 2.5f, 5.7f}, {0, 0, 8.0f}, {0, 0, 8.0f}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
      {{5.0f, 8.5f, 14}, {2.7f, 4.0f, 14.0f}, {0, 0, 10.7f}, {0, 0, 14}, {0, 0, 18}, {0, 0, 19}, {0, 0, 0}}};
  copy_array(c.hw_lat, hw);
  // src/graph/tuning.cc llMaxBws, perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws.
  const double ll[kNumArch][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}, {}};
  const double ring128[kNumArch][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {}};
  const double tree128[kNumArch][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {}};
  const double tree[kNumArch][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {}};
  copy_array(c.ll_max_bw, ll);
  copy_array(c.per_ch_max_ring_ll128_bw, ring128);
  copy_array(c.per_ch_max_tree_ll128_bw, tree128);
  copy_array(c.per_ch_max_tree_bw, tree);
  // ncclTopoTuneModel: Ring/LL busBw * (nNodes > 1 || AllReduce || Reduce ? 1/4 : 1/3);
  // Ring/LL128 * (ppn < 2 ? 0.7 : 0.92).
  c.ring_ll_factor_allreduce = 1.0 / 4.0;
  c.ring_ll_factor_other = 1.0 / 3.0;
  c.ring_ll128_factor_ppn1 = 0.7;
  // src/graph/topo.h SM90_NVLINK_BW 20.0 (v2.18.5-1).
  c.nvlink_bw_per_link[2] = 20.0;
  // src/graph/search.cc sm90SpeedArrayIntra / sm90SpeedArrayInter (v2.18.5-1).
  c.speed_intra[2] = {60.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 6.0, 3.0};
  c.speed_inter[2] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 20.0, 17.5,
                      15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  // src/include/devcomm.h MAXCHANNELS 32; src/init.cc ringGraph.maxChannels = MAXCHANNELS/2;
  // src/transport/nvls.cc NCCL_NVLS_NCHANNELS default 16.
  c.max_channels = 32;
  c.ring_graph_max_channels = 16;
  c.nvls_channels[2] = 16;
  return c;
}

Constants make_v2_21() {
  Constants c = make_common();
  c.version = Version::V2_21;
  c.tag = "v2.21.5-1";
  // src/graph/tuning.cc baseLat (v2.21.5-1).
  const float base[kNumAlgos][kNumProtos] = {
      {6.8f, 14.0f, 0}, {6.6f, 14.0f, 8.4f}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  copy_array(c.base_lat, base);
  // src/graph/tuning.cc hwLat (v2.21.5-1).
  const float hw[kNumHw][kNumAlgos][kNumProtos] = {
      {{.6f, 1.25f, 28}, {.6f, 1.9f, 3.4f}, {0, 0, 3.7f}, {0, 0, 2.8f}, {0, 0, 25}, {0, 0, 25}, {0, 0, 0}},
      {{1.0f, 1.9f, 28}, {1.0f, 2.5f, 5.7f}, {0, 0, 3.7f}, {0, 0, 2.8f}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
      {{5.0f, 8.5f, 28}, {2.7f, 4.0f, 14.0f}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}, {0, 0, 0}}};
  copy_array(c.hw_lat, hw);
  const double ll[kNumArch][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {}};
  const double ring128[kNumArch][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {}};
  const double tree128[kNumArch][3] = {{20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {}};
  const double tree[kNumArch][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {}};
  copy_array(c.ll_max_bw, ll);
  copy_array(c.per_ch_max_ring_ll128_bw, ring128);
  copy_array(c.per_ch_max_tree_ll128_bw, tree128);
  copy_array(c.per_ch_max_tree_bw, tree);
  // ncclTopoTuneModel (v2.21.5-1): Ring/LL busBw * .5; LL128 * (ppn < 2 ? 0.7 : 0.92).
  c.ring_ll_factor_allreduce = c.ring_ll_factor_other = 0.5;
  c.ring_ll128_factor_ppn1 = 0.7;
  // NVLS: latency hwLat[intra][NVLS] (+ interLat), bw min(bwIntra, bwInter), also for AG/RS.
  c.nvls_latency_is_intra = true;
  c.nvls_bw_min_intra_inter = true;
  c.nvls_allgather_reducescatter = true;
  // src/graph/topo.h SM90_NVLINK_BW 20.6 (from v2.20).
  c.nvlink_bw_per_link[2] = 20.6;
  // src/graph/search.cc sm90SpeedArrayIntra / Inter (v2.21.5-1).
  c.speed_intra[2] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
  c.speed_inter[2] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                      15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  c.max_channels = 32;
  c.ring_graph_max_channels = 16;
  c.nvls_channels[2] = 16;
  return c;
}

Constants make_v2_27() {
  Constants c = make_common();
  c.version = Version::V2_27;
  c.tag = "v2.27.7-1";
  // src/graph/tuning.cc baseLat (v2.27.7-1); PAT has no row (its latency is computed).
  const float base[kNumAlgos][kNumProtos] = {
      {6.8f, 14.0f, 8.4f}, {6.6f, 14.0f, 8.4f}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
  copy_array(c.base_lat, base);
  // src/graph/tuning.cc hwLat (v2.27.7-1).
  const float hw[kNumHw][kNumAlgos][kNumProtos] = {
      {{.6f, 1.25f, 4.0f}, {.6f, 1.9f, 3.4f}, {0, 0, 3.7f}, {0, 0, 2.8f}, {0, 0, 25}, {0, 0, 25}, {0, 0, 0}},
      {{1.0f, 1.9f, 4.0f}, {1.0f, 2.5f, 5.7f}, {0, 0, 3.7f}, {0, 0, 2.8f}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}},
      {{5.0f, 8.5f, 14}, {2.7f, 4.0f, 14.0f}, {0, 0, 31}, {0, 0, 30}, {0, 0, 18}, {0, 0, 14}, {0, 0, 0}}};
  copy_array(c.hw_lat, hw);
  const double ll[kNumArch][3] = {
      {39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {141.0, 45.0, 35.0}, {2 * 141.0, 2 * 45.0, 2 * 35.0}};
  const double ring128[kNumArch][3] = {
      {20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 36.7}, {2 * 36.7, 2 * 36.7, 2 * 36.7}};
  const double tree128[kNumArch][3] = {
      {20, 20, 20}, {20, 20, 20}, {36.7, 36.7, 29.0}, {2 * 36.7, 2 * 36.7, 2 * 29.0}};
  const double tree[kNumArch][3] = {
      {26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}, {2 * 38.7, 2 * 41.4, 2 * 36.0}};
  copy_array(c.ll_max_bw, ll);
  copy_array(c.per_ch_max_ring_ll128_bw, ring128);
  copy_array(c.per_ch_max_tree_ll128_bw, tree128);
  copy_array(c.per_ch_max_tree_bw, tree);
  c.has_arch[3] = true;
  // ncclTopoTuneModel (v2.27.7-1): Ring/LL * .5; Ring/LL128 * 0.92 whatever the ppn.
  c.ring_ll_factor_allreduce = c.ring_ll_factor_other = 0.5;
  c.ring_ll128_factor_ppn1 = 0.92;
  c.nvls_latency_is_intra = true;
  c.nvls_bw_min_intra_inter = true;
  c.nvls_allgather_reducescatter = true;
  c.nvls_ag_rs_227_formula = true;
  c.ring_inter_steps_227 = true;
  c.inter_lat_tree_when_ppn1 = true;
  c.pat = true;
  c.ll128_blackwell = true;
  // src/enqueue.cc (v2.27.7-1): nvlsSupport = comm->nvlsSupport && (ncclNvlsSupported(op, type)
  // || func == ncclFuncAllGather); src/nccl.h.in: ncclFloat8e4m3, ncclFloat8e5m2.
  c.nvls_allgather_any_type = true;
  c.fp8_types = true;
  // src/graph/topo.h SM90_NVLINK_BW 20.6, SM100_NVLINK_BW 40.1 (v2.27.7-1).
  c.nvlink_bw_per_link[2] = 20.6;
  c.nvlink_bw_per_link[3] = 40.1;
  // src/graph/search.cc sm90 / sm100 speed arrays (v2.27.7-1).
  c.speed_intra[2] = {60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0};
  c.speed_inter[2] = {48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5,
                      15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  c.speed_intra[3] = {90.0, 80.0, 70.0, 60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0};
  c.speed_inter[3] = {96.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0,
                      17.5, 15.0, 12.0, 6.0,  3.0,  2.4,  1.2,  0.24, 0.12};
  // src/include/device.h MAXCHANNELS 64; src/transport/nvls.cc NVLS_NCHANNELS_SM90 16,
  // NVLS_NCHANNELS_SM100_NVL 24 (single node).
  c.max_channels = 64;
  c.ring_graph_max_channels = 32;
  c.nvls_channels[2] = 16;
  c.nvls_channels[3] = 24;
  return c;
}

}  // namespace

const char* algo_name(Algo a) {
  switch (a) {
    case Algo::Tree: return "tree";
    case Algo::Ring: return "ring";
    case Algo::CollNetDirect: return "collnet_direct";
    case Algo::CollNetChain: return "collnet_chain";
    case Algo::Nvls: return "nvls";
    case Algo::NvlsTree: return "nvls_tree";
    case Algo::Pat: return "pat";
  }
  return "?";
}

const char* proto_name(Proto p) {
  switch (p) {
    case Proto::LL: return "LL";
    case Proto::LL128: return "LL128";
    case Proto::Simple: return "Simple";
  }
  return "?";
}

const char* version_name(Version v) {
  switch (v) {
    case Version::V2_18: return "2.18";
    case Version::V2_21: return "2.21";
    case Version::V2_27: return "2.27";
  }
  return "?";
}

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Volta: return "sm70";
    case Arch::Ampere: return "sm80";
    case Arch::Hopper: return "sm90";
    case Arch::Blackwell: return "sm100";
  }
  return "?";
}

const Constants& constants(Version v) {
  static const Constants k18 = make_v2_18();
  static const Constants k21 = make_v2_21();
  static const Constants k27 = make_v2_27();
  switch (v) {
    case Version::V2_18: return k18;
    case Version::V2_21: return k21;
    case Version::V2_27: return k27;
  }
  return k27;
}

Version version_from_string(const std::string& text, const std::string& key_path) {
  std::size_t i = 0;
  if (i < text.size() && (text[i] == 'v' || text[i] == 'V')) ++i;
  auto read_int = [&](int& out) {
    std::size_t start = i;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == start || i - start > 4) return false;
    out = std::atoi(text.substr(start, i - start).c_str());
    return true;
  };
  int major = 0, minor = 0;
  bool ok = read_int(major) && i < text.size() && text[i] == '.' && (++i, read_int(minor));
  if (!ok || major != 2) {
    throw InputError(key_path, "NCCL version '" + text +
                                   "' is not of the form 2.MINOR[.PATCH]; tables exist for 2.18, "
                                   "2.21 and 2.27 (older releases use 2.18's)");
  }
  if (minor <= 18) return Version::V2_18;
  if (minor <= 24) return Version::V2_21;
  return Version::V2_27;
}

}  // namespace zerosim::nccl
