// The run-time invariant checks of ZEROSIM_CHECK_INVARIANTS builds (Debug, the asan-ubsan and
// fuzz presets): fed a broken CommBackend or a broken allocation sequence, the engine and the
// memory replay must stop with std::logic_error naming what broke, instead of playing on.
// Builds without the checks skip these (the release suite checks the same rules after the fact,
// in invariants_test.cpp).
#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/core/engine.h"
#include "sim/memory/memory_timeline.h"

namespace zerosim {
namespace {

#if defined(ZEROSIM_CHECK_INVARIANTS) && ZEROSIM_CHECK_INVARIANTS
#define REQUIRE_CHECKS() (void)0
#else
#define REQUIRE_CHECKS() GTEST_SKIP() << "built without ZEROSIM_CHECK_INVARIANTS"
#endif

// Compute ops last op.work microseconds.
struct FixedCompute : ComputeModel {
  SimTime duration(const Plan& plan, OpId op) override {
    return plan.ops[op].work * kPicosPerMicro;
  }
};

// A backend that finishes collective c at start + offset_us, and can misbehave: report a
// collective twice, or report one that was never started.
class ScriptedComm : public CommBackend {
 public:
  explicit ScriptedComm(SimTime offset_us) : offset_(offset_us * kPicosPerMicro) {}
  bool repeat = false;             // pop every collective twice
  std::int64_t phantom = -1;       // also pop this collective id with the first completion
  void start(const Plan&, std::uint32_t c, SimTime now) override {
    pending_.emplace(std::make_pair(now + offset_, c), c);
  }
  SimTime next_completion() const override {
    return pending_.empty() ? kNever : pending_.begin()->first.first;
  }
  void pop_completed(SimTime now, std::vector<std::uint32_t>& done) override {
    while (!pending_.empty() && pending_.begin()->first.first == now) {
      done.push_back(pending_.begin()->second);
      if (repeat) done.push_back(pending_.begin()->second);
      pending_.erase(pending_.begin());
    }
    if (phantom >= 0) {
      done.push_back(static_cast<std::uint32_t>(phantom));
      phantom = -1;
    }
  }

 private:
  SimTime offset_;
  std::multimap<std::pair<SimTime, std::uint32_t>, std::uint32_t> pending_;
};

struct Builder {
  Plan plan;
  explicit Builder(int ranks) {
    plan.num_ranks = ranks;
    plan.names = {"op", "alloc activations", "free activations", "alloc params", "alloc x",
                  "free x", "alloc y"};
  }
  OpId add(OpKind kind, Stream stream, int rank, int work, std::vector<OpId> deps = {},
           int name = 0, Bytes bytes = 0, MemCategory category = MemCategory::Buffers) {
    Op o;
    o.kind = kind;
    o.stream = stream;
    o.rank = rank;
    o.work = work;
    o.name = name;
    o.bytes = bytes;
    o.category = category;
    o.dep_begin = static_cast<std::uint32_t>(plan.deps.size());
    o.dep_count = static_cast<std::uint32_t>(deps.size());
    plan.deps.insert(plan.deps.end(), deps.begin(), deps.end());
    plan.ops.push_back(o);
    return static_cast<OpId>(plan.ops.size() - 1);
  }
  // A collective over ranks 0..n-1 (one member per rank on the DP stream), member r holding
  // bytes[r], after deps[r].
  std::vector<OpId> collective(std::vector<Bytes> bytes, std::vector<std::vector<OpId>> deps) {
    const auto id = static_cast<std::uint32_t>(plan.collectives.size());
    Collective c;
    c.bytes = bytes[0];
    c.member_begin = static_cast<std::uint32_t>(plan.members.size());
    c.member_count = static_cast<std::uint32_t>(bytes.size());
    plan.collectives.push_back(c);
    std::vector<OpId> ops;
    for (std::size_t r = 0; r < bytes.size(); ++r) {
      ops.push_back(add(OpKind::Collective, Stream::DpComm, static_cast<int>(r),
                        static_cast<int>(id), deps[r], 0, bytes[r]));
      plan.members.push_back(ops.back());
    }
    return ops;
  }
};

std::string logic_error_of(const Plan& plan, CommBackend& comm) {
  FixedCompute compute;
  try {
    (void)run_engine(plan, compute, comm);
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "(no error)";
}

// Two ranks compute 10 us, then all-reduce; the backend's answer is what each test varies.
Builder compute_then_collective() {
  Builder b(2);
  const OpId a0 = b.add(OpKind::Compute, Stream::Compute, 0, 10);
  const OpId a1 = b.add(OpKind::Compute, Stream::Compute, 1, 10);
  b.collective({64, 64}, {{a0}, {a1}});
  return b;
}

TEST(invariantsChecks, WellBehavedBackendPasses) {
  Builder b = compute_then_collective();
  ScriptedComm comm(5);
  EXPECT_EQ(logic_error_of(b.plan, comm), "(no error)");
}

TEST(invariantsChecks, TimeGoingBackwardsIsCaught) {
  REQUIRE_CHECKS();
  Builder b = compute_then_collective();
  ScriptedComm comm(-5);  // finishes the all-reduce 5 us before it started
  const std::string err = logic_error_of(b.plan, comm);
  EXPECT_NE(err.find("simulated time went backwards"), std::string::npos) << err;
}

TEST(invariantsChecks, OpEndingTwiceIsCaught) {
  REQUIRE_CHECKS();
  Builder b = compute_then_collective();
  ScriptedComm comm(5);
  comm.repeat = true;
  const std::string err = logic_error_of(b.plan, comm);
  EXPECT_NE(err.find("ended twice"), std::string::npos) << err;
}

// The backend reports collective 1 done while collective 0 ends; collective 1's members wait for
// ops after collective 0, so they have not even started.
TEST(invariantsChecks, CollectiveEndingBeforeItStartsIsCaught) {
  REQUIRE_CHECKS();
  Builder b = compute_then_collective();
  const OpId c0 = b.plan.members[0], c1 = b.plan.members[1];
  const OpId x0 = b.add(OpKind::Compute, Stream::Compute, 0, 10, {c0});
  const OpId x1 = b.add(OpKind::Compute, Stream::Compute, 1, 10, {c1});
  b.collective({64, 64}, {{x0}, {x1}});
  ScriptedComm comm(5);
  comm.phantom = 1;
  const std::string err = logic_error_of(b.plan, comm);
  EXPECT_NE(err.find("before it started"), std::string::npos) << err;
}

// What rank 0 sends in a send/recv is what rank 1 receives: members hold the same buffer size.
TEST(invariantsChecks, MembersWithDifferentBuffersAreCaught) {
  REQUIRE_CHECKS();
  Builder b(2);
  b.collective({64, 32}, {{}, {}});
  ScriptedComm comm(5);
  const std::string err = logic_error_of(b.plan, comm);
  EXPECT_NE(err.find("holds 32 bytes of"), std::string::npos) << err;
}

// ---- memory replay ------------------------------------------------------------------------

// Plays `ops` (Alloc/Free on rank 0's compute stream, in order, 1 us apart) through the engine
// and the memory replay; returns the replay's logic_error, or "(no error)".
struct MemOp {
  OpKind kind;
  int name;
  Bytes bytes;
  MemCategory category;
};
std::string replay_error(const std::vector<MemOp>& ops) {
  Builder b(1);
  for (const MemOp& m : ops) {
    b.add(OpKind::Compute, Stream::Compute, 0, 1);
    b.add(m.kind, Stream::Compute, 0, 0, {}, m.name, m.bytes, m.category);
  }
  FixedCompute compute;
  ScriptedComm comm(0);
  const EngineResult r = run_engine(b.plan, compute, comm);
  try {
    (void)replay_memory(b.plan, r, 0, true);
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "(no error)";
}

constexpr int kAllocAct = 1, kFreeAct = 2, kAllocParams = 3, kAllocX = 4, kFreeX = 5, kAllocY = 6;

TEST(invariantsChecks, BalancedAllocationsPass) {
  // Model states held past the step, a temporary allocated twice and freed twice.
  EXPECT_EQ(replay_error({{OpKind::Alloc, kAllocParams, 100, MemCategory::Params},
                          {OpKind::Alloc, kAllocX, 10, MemCategory::Buffers},
                          {OpKind::Alloc, kAllocX, 10, MemCategory::Buffers},
                          {OpKind::Free, kFreeX, 10, MemCategory::Buffers},
                          {OpKind::Free, kFreeX, 10, MemCategory::Buffers},
                          {OpKind::Alloc, kAllocAct, 5, MemCategory::Activations},
                          {OpKind::Free, kFreeAct, 5, MemCategory::Activations}}),
            "(no error)");
}

// The category total stays positive (y covers it), so only the per-allocation ledger sees that
// x is freed beyond what was allocated.
TEST(invariantsChecks, FreeingMoreThanAllocatedIsCaught) {
  REQUIRE_CHECKS();
  const std::string err = replay_error({{OpKind::Alloc, kAllocY, 100, MemCategory::Buffers},
                                        {OpKind::Alloc, kAllocX, 10, MemCategory::Buffers},
                                        {OpKind::Free, kFreeX, 15, MemCategory::Buffers}});
  EXPECT_NE(err.find("frees 5 bytes more of buffers"), std::string::npos) << err;
}

TEST(invariantsChecks, PartlyFreedAllocationIsALeak) {
  REQUIRE_CHECKS();
  const std::string err = replay_error({{OpKind::Alloc, kAllocX, 10, MemCategory::Buffers},
                                        {OpKind::Alloc, kAllocX, 10, MemCategory::Buffers},
                                        {OpKind::Free, kFreeX, 10, MemCategory::Buffers}});
  EXPECT_NE(err.find("10 bytes of 'x' (buffers) on rank 0 are still allocated"), std::string::npos)
      << err;
}

TEST(invariantsChecks, ActivationsOutlivingTheStepAreALeak) {
  REQUIRE_CHECKS();
  const std::string err = replay_error({{OpKind::Alloc, kAllocAct, 7, MemCategory::Activations}});
  EXPECT_NE(err.find("'activations' (activations)"), std::string::npos) << err;
}

// Memory never negative holds in every build (it was checked before the option existed).
TEST(invariantsChecks, NegativeMemoryIsCaughtInEveryBuild) {
  const std::string err = replay_error({{OpKind::Free, kFreeX, 1, MemCategory::Grads}});
  EXPECT_NE(err.find("went negative"), std::string::npos) << err;
}

}  // namespace
}  // namespace zerosim
