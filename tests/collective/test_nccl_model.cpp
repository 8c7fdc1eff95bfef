// NCCL's tuner replayed: graph search results for the presets, the (algorithm, protocol) NCCL
// picks, its latency formulas, and zerosim's closed form on top (exact ring formula, launch and
// pipeline terms, point-to-point).
#include <gtest/gtest.h>

#include <numeric>

#include "sim/cluster/cluster.h"
#include "sim/collective/nccl_backend.h"
#include "sim/collective/nccl_model.h"
#include "sim/core/engine.h"
#include "sim/core/error.h"

namespace zerosim::nccl {
namespace {

using nlohmann::json;

ClusterSpec preset(const std::string& name, int nodes) {
  return cluster_from_json(json{{"preset", name}, {"nodes", nodes}}, "cluster");
}

std::vector<std::int32_t> first(int n) {
  std::vector<std::int32_t> r(n);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

constexpr int kF = static_cast<int>(Func::AllReduce);
constexpr int kRing = static_cast<int>(Algo::Ring);
constexpr int kTree = static_cast<int>(Algo::Tree);
constexpr int kNvls = static_cast<int>(Algo::Nvls);
constexpr int kLL = 0, kSimple = 2;

// The graph search of src/graph/search.cc on the presets:
//  DGX A100, one node: 12 NVLinks x 20 GB/s = 240; speed 40 fits 6 channels = 240 (optimal),
//    duplicated to 12 x 20; the kernels run on 24 channels.
//  DGX H100 (2.18): 18 x 20 = 360: 6 x 60, duplicated to 12 x 30.
//  GB200 (2.27): 18 x 40.1 = 721.8: 8 x 90 = 720, duplicated to 16 x 45, 32 channels.
//  Two DGX A100: HDR 25 GB/s, PCIe Gen4 24 -> speed 24, one channel per NIC: 8 x 24 = 192
//    (below 25 GB/s: no duplication).
//  Two DGX H100: NDR 50, PCIe Gen5 48 -> 48 would fit only 7 channels in 360 GB/s of NVLink;
//    45 fits 8: 8 x 45 = 360 (Hopper, < 50 GB/s and > 4 channels: no duplication).
//  Two 4-NIC A100 nodes: 4 x 24 = 96.
TEST(ncclModel, GraphSearchOnPresets) {
  struct Case { const char* preset; int nodes; int ch; double bw; int comm; };
  const Case cases[] = {{"dgx-a100-80gb", 1, 12, 20, 24}, {"dgx-h100", 1, 12, 30, 24},
                        {"gb200-nvl72", 2, 16, 45, 32},   {"dgx-a100-80gb", 2, 8, 24, 16},
                        {"dgx-h100", 2, 8, 45, 16},       {"vtrain-a100-800g", 2, 4, 24, 8}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.preset) + " x" + std::to_string(c.nodes));
    NcclModel m(preset(c.preset, c.nodes));
    const CommInfo& comm = m.comm(first(m.cluster().num_gpus()));
    EXPECT_EQ(comm.ring.n_channels, c.ch);
    EXPECT_DOUBLE_EQ(comm.ring.bw_intra, c.bw);
    EXPECT_EQ(comm.comm_channels, c.comm);
  }
}

// NVLS graph: one head per GPU; each GPU's NVLinks carry (heads + 1) x speed
// (ncclTopoSearchTryNvls). H200 (2.27, 370.8 GB/s): 8 GPUs -> 40 (9 x 40 = 360), 6 -> 50,
// 5 -> 60. H100 with 2.18's speeds (no 50): 6 GPUs -> 40.
TEST(ncclModel, NvlsGraphDependsOnGpuCount) {
  NcclModel h200(preset("dgx-h200", 1));
  EXPECT_DOUBLE_EQ(h200.comm(first(8)).nvls.bw_intra, 40);
  EXPECT_EQ(h200.comm(first(8)).nvls.n_channels, 8);
  EXPECT_DOUBLE_EQ(h200.comm(first(6)).nvls.bw_intra, 50);
  EXPECT_DOUBLE_EQ(h200.comm(first(5)).nvls.bw_intra, 60);
  NcclModel h100(preset("dgx-h100", 1));
  EXPECT_DOUBLE_EQ(h100.comm(first(6)).nvls.bw_intra, 40);
  NcclModel a100(preset("dgx-a100-80gb", 1));
  EXPECT_FALSE(a100.comm(first(8)).nvls_support);
}

// ncclTopoTuneModel latencies, by hand:
//  Ring/LL, 8 GPUs, one node: baseLat 6.6 + 2(8-1) x 0.6 = 15.0 us.
//  NVLS (2.27), one node: hwLat[NVLINK][NVLS][Simple] = 25 us.
//  Tree/Simple (2.27), 2 DGX H100: baseLat 8.4 + 2 x ((16/2 - 1) x 4.0 + log2(2) x 14) = 92.4 us.
//  Ring/Simple (2.27), 2 DGX H100: 8.4 + (30 - 2) x max(3.4, 3 x 1.0) + 2 x 14 = 131.6 us.
TEST(ncclModel, LatencyFormulas) {
  NcclModel a100(preset("dgx-a100-80gb", 1));
  EXPECT_NEAR(a100.comm(first(8)).latency[kF][kRing][kLL], 15.0, 1e-5);
  NcclModel h200(preset("dgx-h200", 1));
  EXPECT_DOUBLE_EQ(h200.comm(first(8)).latency[kF][kNvls][kSimple], 25.0);
  ModelOptions v27;
  v27.nccl_version = "2.27";
  NcclModel h100(preset("dgx-h100", 2), v27);
  EXPECT_NEAR(h100.comm(first(16)).latency[kF][kTree][kSimple], 92.4, 1e-5);
  EXPECT_NEAR(h100.comm(first(16)).latency[kF][kRing][kSimple], 131.6, 1e-5);
}

// "Ring all-reduce on ideal links equals 2(N-1)/N S/B + 2(N-1) alpha exactly": with NCCL's ring
// (bus bandwidth B = channels x speed = 240 GB/s on DGX A100, per-step latency alpha =
// hwLat[NVLINK][Ring][Simple]) and zerosim's extra terms off, the prediction is that formula plus
// NCCL's constant per-call baseLat.
TEST(ncclModel, RingAllReduceIsTheTextbookFormula) {
  ModelOptions o;
  o.launch_overhead = false;
  o.pipeline_term = false;
  o.algo = Algo::Ring;
  o.proto = Proto::Simple;
  NcclModel m(preset("dgx-a100-80gb", 1), o);
  const Constants& k = m.constants();
  const double alpha = k.hw_lat[0][kRing][kSimple] * 1e-6;
  const double base = k.base_lat[kRing][kSimple] * 1e-6;
  const double B = 240e9;
  for (int n = 2; n <= 8; ++n) {
    for (Bytes s : {Bytes{1} << 20, Bytes{1} << 30, Bytes{12345678901}}) {
      SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(s) + " B");
      const Prediction p = m.predict(CollectiveKind::AllReduce, s, first(n));
      const double expect = 2.0 * (n - 1) / n * static_cast<double>(s) / B + 2.0 * (n - 1) * alpha;
      EXPECT_NEAR(p.seconds - base, expect, 1e-12 * expect);
      EXPECT_NEAR(p.busbw, p.algbw * 2.0 * (n - 1) / n, 1e-9 * p.busbw);
    }
  }
}

// H200, 8 GPUs, NCCL 2.27: the measured switch (validate/measurements/collectives.json: "RING/LL up to 1 MiB and
// NVLS/SIMPLE from 2 MiB") falls out of NCCL's model: at 1 MiB ring/LL 15 + 1048576/80.6e3 =
// 28.0 us beats NVLS 25 + 3.9 = 28.9 us; at 2 MiB NVLS 32.9 beats ring/LL 41.0.
TEST(ncclModel, H200SwitchesFromRingLLToNvlsAt2MiB) {
  NcclModel m(preset("dgx-h200", 1));
  auto p1 = m.predict(CollectiveKind::AllReduce, 1 << 20, first(8));
  EXPECT_EQ(p1.algo, Algo::Ring);
  EXPECT_EQ(p1.proto, Proto::LL);
  auto p2 = m.predict(CollectiveKind::AllReduce, 2 << 20, first(8));
  EXPECT_EQ(p2.algo, Algo::Nvls);
  EXPECT_EQ(p2.proto, Proto::Simple);
}

// At 8 GiB NVLS takes over from 5 GPUs on H200 and from 6 on B200 (validate/measurements/collectives.json), because
// the NVLS graph speed shrinks as (heads + 1) x speed fills the NVLinks while the ring's does not.
TEST(ncclModel, NvlsCrossoverByGpuCount) {
  NcclModel h200(preset("dgx-h200", 1));
  NcclModel b200(preset("gb200-nvl72", 2));
  for (int n = 2; n <= 8; ++n) {
    SCOPED_TRACE(n);
    EXPECT_EQ(h200.predict(CollectiveKind::AllReduce, Bytes{8} << 30, first(n)).algo,
              n >= 5 ? Algo::Nvls : Algo::Ring);
    EXPECT_EQ(b200.predict(CollectiveKind::AllReduce, Bytes{8} << 30, first(n)).algo,
              n >= 6 ? Algo::Nvls : Algo::Ring);
  }
}

TEST(ncclModel, AllGatherAndDisabledNvlsUseTheRing) {
  NcclModel h200(preset("dgx-h200", 1));
  EXPECT_EQ(h200.predict(CollectiveKind::AllGather, Bytes{16} << 30, first(8)).algo, Algo::Ring);
  EXPECT_EQ(h200.predict(CollectiveKind::ReduceScatter, Bytes{16} << 30, first(8)).algo,
            Algo::Ring);
  ModelOptions off;
  off.nvls_enable = false;
  NcclModel no_nvls(preset("dgx-h200", 1), off);
  for (Bytes s = 1024; s <= (Bytes{1} << 34); s *= 8) {
    EXPECT_NE(no_nvls.predict(CollectiveKind::AllReduce, s, first(8)).algo, Algo::Nvls);
  }
}

TEST(ncclModel, ForcedAlgorithmThatCannotRunIsAnInputError) {
  ModelOptions o;
  o.algo = Algo::Tree;
  NcclModel m(preset("dgx-h100", 1), o);
  EXPECT_EQ(m.predict(CollectiveKind::AllReduce, 1 << 20, first(8)).algo, Algo::Tree);
  try {
    m.predict(CollectiveKind::AllGather, 1 << 20, first(8));
    FAIL() << "tree all-gather accepted";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "collective.algo");
  }
}

// Ring/Simple on one DGX A100 at 16 GiB: 24 channels x 8 ranks x 2 MiB = 384 MiB per loop, 43
// loops; 2 slices per step; the slice term is (43 x 14 x 2 - 14) x 3.4 us = 4046 us.
TEST(ncclModel, PipelineTermCountsSlicesPerLoop) {
  NcclModel m(preset("dgx-a100-80gb", 1));
  auto p = m.predict(CollectiveKind::AllReduce, Bytes{16} << 30, first(8));
  ASSERT_EQ(p.algo, Algo::Ring);
  ASSERT_EQ(p.proto, Proto::Simple);
  EXPECT_EQ(p.channels, 24);
  EXPECT_NEAR(p.pipeline_s, (43.0 * 14 * 2 - 14) * 3.4e-6, 1e-9);
  EXPECT_DOUBLE_EQ(p.launch_s, kLaunchOverheadS);
  EXPECT_NEAR(p.seconds, p.launch_s + p.latency_s + p.pipeline_s + p.bandwidth_s, 1e-15);
}

// Multi-node ring all-reduce: NCCL's plateau factor x1.4 on the latency, no slice term.
TEST(ncclModel, MultiNodeRingUsesNcclsPlateau) {
  ModelOptions o;
  o.nccl_version = "2.27";
  o.algo = Algo::Ring;
  o.proto = Proto::Simple;
  NcclModel m(preset("dgx-h100", 2), o);
  auto p = m.predict(CollectiveKind::AllReduce, Bytes{1} << 30, first(16));
  EXPECT_NEAR(p.latency_s, 131.6e-6 * 1.4, 1e-10);
  EXPECT_DOUBLE_EQ(p.pipeline_s, 0);
}

TEST(ncclModel, SmallMessagesTrimChannels) {
  NcclModel m(preset("dgx-a100-80gb", 1));
  // Ring/LL threshold: 8 B x 8 ranks per thread x 512 threads = 32 KiB per channel.
  auto p = m.predict(CollectiveKind::AllReduce, 64 << 10, first(8));
  EXPECT_EQ(p.algo, Algo::Ring);
  EXPECT_EQ(p.proto, Proto::LL);
  EXPECT_EQ(p.channels, 2);
}

// Send/recv across two DGX H100: one NIC per GPU at NCCL's 48 GB/s (NDR 50, PCIe Gen5 48).
TEST(ncclModel, SendRecvAcrossNodesUsesTheGpusNic) {
  NcclModel m(preset("dgx-h100", 2));
  std::vector<std::int32_t> pair = {0, 8};
  auto p = m.predict(CollectiveKind::SendRecv, Bytes{1} << 30, pair);
  EXPECT_TRUE(p.p2p);
  EXPECT_NEAR(p.bandwidth_s, static_cast<double>(Bytes{1} << 30) / 48e9, 1e-12);
  EXPECT_DOUBLE_EQ(p.busbw, p.algbw);
  auto a2a = m.predict(CollectiveKind::AllToAll, Bytes{1} << 30, first(16));
  EXPECT_GT(a2a.seconds, 0);
  EXPECT_NEAR(a2a.busbw, a2a.algbw * 15.0 / 16, 1e-6 * a2a.busbw);
}

TEST(ncclModel, BusFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::AllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::AllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::ReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveKind::SendRecv, 2), 1.0);
}

TEST(ncclModel, TrivialCallsCostNothing) {
  NcclModel m(preset("dgx-h100", 1));
  EXPECT_DOUBLE_EQ(m.predict(CollectiveKind::AllReduce, 1 << 20, first(1)).seconds, 0);
  EXPECT_DOUBLE_EQ(m.predict(CollectiveKind::AllReduce, 0, first(8)).seconds, 0);
}

TEST(ncclModel, BadInputs) {
  NcclModel m(preset("dgx-h100", 1));
  std::vector<std::int32_t> out = {0, 8};
  EXPECT_THROW(m.predict(CollectiveKind::AllReduce, 1024, out), std::invalid_argument);
  std::vector<std::int32_t> dup = {1, 1};
  EXPECT_THROW(m.predict(CollectiveKind::AllReduce, 1024, dup), std::invalid_argument);
  try {
    parse_collective("allreduse", "collective.op");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "collective.op");
    EXPECT_NE(std::string(e.what()).find("all_reduce"), std::string::npos);
  }
  EXPECT_EQ(parse_collective("all-gather", "k"), CollectiveKind::AllGather);
  EXPECT_EQ(parse_algo("NVLS_TREE", "k"), Algo::NvlsTree);
  EXPECT_THROW(parse_algo("collnet", "k"), InputError);
  EXPECT_EQ(parse_proto("ll128", "k"), Proto::LL128);
  ModelOptions o;
  o.nccl_version = "2.18";
  NcclModel old(preset("gb200-nvl72", 1), o);
  EXPECT_THROW(old.predict(CollectiveKind::AllReduce, 1024, first(4)), InputError);
}

// NCCL's arch row is the preset's generation, whatever the GPU is called.
TEST(ncclModel, ArchFromGpuGeneration) {
  GpuSpec g;
  g.name = "mystery";
  g.generation = GpuGeneration::Volta;
  EXPECT_EQ(arch_of(g), Arch::Volta);
  g.generation = GpuGeneration::Ampere;
  EXPECT_EQ(arch_of(g), Arch::Ampere);
  g.generation = GpuGeneration::Hopper;
  EXPECT_EQ(arch_of(g), Arch::Hopper);
  g.generation = GpuGeneration::Blackwell;
  EXPECT_EQ(arch_of(g), Arch::Blackwell);
  EXPECT_EQ(arch_of(preset("gb200-nvl72", 1).gpu), Arch::Blackwell);
  EXPECT_EQ(arch_of(preset("dgx-2-v100", 1).gpu), Arch::Volta);
}

struct ZeroCompute : ComputeModel {
  SimTime duration(const Plan&, OpId) override { return 0; }
};

// The engine backend: one all-reduce over 8 ranks ends when the model says.
TEST(ncclModel, BackendTimesAPlan) {
  NcclModel m(preset("dgx-h100", 1));
  Plan plan;
  plan.num_ranks = 8;
  plan.group_names.push_back("dp");
  for (int r = 0; r < 8; ++r) plan.group_ranks.push_back(r);
  plan.group_begin.push_back(8);
  plan.names.push_back("allreduce");
  Collective c;
  c.kind = CollectiveKind::AllReduce;
  c.group = 0;
  c.bytes = Bytes{256} << 20;
  c.member_begin = 0;
  c.member_count = 8;
  plan.collectives.push_back(c);
  for (int r = 0; r < 8; ++r) {
    Op op;
    op.kind = OpKind::Collective;
    op.stream = Stream::DpComm;
    op.rank = r;
    op.work = 0;
    op.bytes = c.bytes;
    plan.ops.push_back(op);
    plan.members.push_back(static_cast<OpId>(r));
  }
  ZeroCompute compute;
  NcclAnalyticalComm comm(m);
  EngineResult res = run_engine(plan, compute, comm);
  EXPECT_EQ(res.makespan,
            seconds_to_ps(m.predict(CollectiveKind::AllReduce, c.bytes, first(8)).seconds));
}

}  // namespace
}  // namespace zerosim::nccl
