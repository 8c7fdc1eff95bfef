// Engine rules checked on tiny hand-built plans with fixed durations.
#include "sim/core/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>

namespace zerosim {
namespace {

// Compute ops last op.work microseconds.
class FixedCompute : public ComputeModel {
 public:
  SimTime duration(const Plan& plan, OpId op) override {
    return plan.ops[op].work * kPicosPerMicro;
  }
};

// Collectives last `micros` microseconds from their start.
class FixedComm : public CommBackend {
 public:
  explicit FixedComm(SimTime micros) : micros_(micros) {}
  void start(const Plan&, std::uint32_t c, SimTime now) override {
    pending_.emplace(std::make_pair(now + micros_ * kPicosPerMicro, c), c);
  }
  SimTime next_completion() const override {
    return pending_.empty() ? kNever : pending_.begin()->first.first;
  }
  void pop_completed(SimTime now, std::vector<std::uint32_t>& done) override {
    while (!pending_.empty() && pending_.begin()->first.first == now) {
      done.push_back(pending_.begin()->second);
      pending_.erase(pending_.begin());
    }
  }

 private:
  SimTime micros_;
  std::map<std::pair<SimTime, std::uint32_t>, std::uint32_t> pending_;
};

struct Builder {
  Plan plan;
  explicit Builder(int ranks) {
    plan.num_ranks = ranks;
    plan.names = {"op"};
  }
  OpId add(OpKind kind, Stream stream, int rank, int work, std::vector<OpId> deps = {}) {
    Op o;
    o.kind = kind;
    o.stream = stream;
    o.rank = rank;
    o.work = work;
    o.dep_begin = static_cast<std::uint32_t>(plan.deps.size());
    o.dep_count = static_cast<std::uint32_t>(deps.size());
    plan.deps.insert(plan.deps.end(), deps.begin(), deps.end());
    plan.ops.push_back(o);
    return static_cast<OpId>(plan.ops.size() - 1);
  }
  // A collective over ranks 0..n-1, one member op per rank on the DP stream.
  std::vector<OpId> collective(int n, std::vector<std::vector<OpId>> deps) {
    std::uint32_t id = static_cast<std::uint32_t>(plan.collectives.size());
    Collective c;
    c.member_begin = static_cast<std::uint32_t>(plan.members.size());
    c.member_count = static_cast<std::uint32_t>(n);
    plan.collectives.push_back(c);
    std::vector<OpId> ops;
    for (int r = 0; r < n; ++r) {
      ops.push_back(add(OpKind::Collective, Stream::DpComm, r, static_cast<int>(id), deps[r]));
      plan.members.push_back(ops.back());
    }
    return ops;
  }
};

TEST(Engine, StreamOrderSerialisesOpsOnOneStream) {
  // Two compute ops of 3 us and 5 us on one stream: the second starts at 3 and ends at 8 us.
  Builder b(1);
  OpId a = b.add(OpKind::Compute, Stream::Compute, 0, 3);
  OpId c = b.add(OpKind::Compute, Stream::Compute, 0, 5);
  FixedCompute compute;
  FixedComm comm(0);
  EngineResult r = run_engine(b.plan, compute, comm);
  EXPECT_EQ(r.end[a], 3 * kPicosPerMicro);
  EXPECT_EQ(r.start[c], 3 * kPicosPerMicro);
  EXPECT_EQ(r.end[c], 8 * kPicosPerMicro);
  EXPECT_EQ(r.makespan, 8 * kPicosPerMicro);
}

TEST(Engine, StreamsOfOneRankOverlap) {
  // Compute 10 us on the compute stream; a 4 us copy on the H2D stream runs beside it.
  Builder b(1);
  b.add(OpKind::Compute, Stream::Compute, 0, 10);
  OpId copy = b.add(OpKind::Copy, Stream::H2D, 0, 4);
  FixedCompute compute;
  FixedComm comm(0);
  EngineResult r = run_engine(b.plan, compute, comm);
  EXPECT_EQ(r.start[copy], 0);
  EXPECT_EQ(r.end[copy], 4 * kPicosPerMicro);
  EXPECT_EQ(r.makespan, 10 * kPicosPerMicro);
}

TEST(Engine, CollectiveWaitsForItsLastMember) {
  // Rank 0 computes 2 us, rank 1 computes 7 us, then an all-reduce of 5 us: it starts at 7 on
  // both ranks and ends at 12; rank 0's compute after the collective runs 12..13.
  Builder b(2);
  OpId c0 = b.add(OpKind::Compute, Stream::Compute, 0, 2);
  OpId c1 = b.add(OpKind::Compute, Stream::Compute, 1, 7);
  auto coll = b.collective(2, {{c0}, {c1}});
  OpId after = b.add(OpKind::Compute, Stream::Compute, 0, 1, {coll[0]});
  FixedCompute compute;
  FixedComm comm(5);
  EngineResult r = run_engine(b.plan, compute, comm);
  EXPECT_EQ(r.start[coll[0]], 7 * kPicosPerMicro);
  EXPECT_EQ(r.end[coll[0]], 12 * kPicosPerMicro);
  EXPECT_EQ(r.end[coll[1]], 12 * kPicosPerMicro);
  EXPECT_EQ(r.start[after], 12 * kPicosPerMicro);
  EXPECT_EQ(r.end[after], 13 * kPicosPerMicro);
}

TEST(Engine, SameInputSameFingerprint) {
  Builder b(2);
  OpId c0 = b.add(OpKind::Compute, Stream::Compute, 0, 2);
  OpId c1 = b.add(OpKind::Compute, Stream::Compute, 1, 3);
  b.collective(2, {{c0}, {c1}});
  FixedCompute compute;
  FixedComm comm1(5), comm2(5), comm3(6);
  EngineResult r1 = run_engine(b.plan, compute, comm1);
  EngineResult r2 = run_engine(b.plan, compute, comm2);
  EngineResult r3 = run_engine(b.plan, compute, comm3);
  EXPECT_EQ(r1.fingerprint, r2.fingerprint);
  EXPECT_NE(r1.fingerprint, r3.fingerprint);
}

TEST(Engine, DeadlockIsReported) {
  // A collective whose second member waits for an op after the collective on rank 0's stream.
  Builder b(2);
  auto coll = b.collective(2, {{}, {}});
  // Make rank 1's member depend on a compute op that comes after rank 0's member.
  OpId later = b.add(OpKind::Compute, Stream::DpComm, 0, 1);
  b.plan.ops[coll[1]].dep_begin = static_cast<std::uint32_t>(b.plan.deps.size());
  b.plan.ops[coll[1]].dep_count = 1;
  b.plan.deps.push_back(later);
  FixedCompute compute;
  FixedComm comm(1);
  EXPECT_THROW(run_engine(b.plan, compute, comm), std::logic_error);
}

}  // namespace
}  // namespace zerosim
