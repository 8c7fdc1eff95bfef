// validate/schedule: issue orders under the simulator's rules, and the plans it must refuse.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/validate/plan_builders.h"
#include "validate/schedule.h"

namespace zv = zerosim::validate;
using zerosim::validate::test::PlanBuilder;

namespace {

std::string schedule_error(const nlohmann::json& doc) {
  try {
    zv::build_schedule(zv::parse_plan(doc));
  } catch (const zv::ScheduleError& e) {
    return e.what();
  }
  return "";
}

int position(const std::vector<int>& order, int id) {
  return static_cast<int>(std::find(order.begin(), order.end(), id) - order.begin());
}

// Rank 0: compute a (stream compute), all_reduce X on dp-comm after a, compute b after X.
// Rank 1: all_reduce X first (no deps), then compute c.
// X completes when both ranks reached it; on rank 0 that is after a, so the order is a, X, b.
TEST(Schedule, CollectivesCompleteWhenEveryMemberArrived) {
  PlanBuilder b(2);
  const int g = b.group({0, 1});
  const int a = b.compute(0, "a");
  const int x0 = b.collective(0, "all_reduce", g, 64, "dp-comm", {a});
  const int b0 = b.compute(0, "b", "compute", {x0});
  const int x1 = b.collective(1, "all_reduce", g, 64);
  const int c1 = b.compute(1, "c");
  const zv::ReplayPlan p = zv::parse_plan(b.doc());
  const zv::Schedule s = zv::build_schedule(p);
  EXPECT_EQ(s.collectives, 1);
  EXPECT_EQ(s.ranks[0].order, (std::vector<int>{a, x0, b0}));
  EXPECT_EQ(s.ranks[0].coll_seq[x0], 0);
  EXPECT_EQ(s.ranks[1].coll_seq[x1], 0);
  EXPECT_EQ(s.ranks[1].order.size(), 2u);
  EXPECT_LT(position(s.ranks[1].order, c1), 2);
}

// Two groups over the same two ranks. Both ranks meet X (group 0) and Y (group 1) on different
// streams in opposite op-id order; the collectives still meet in one global order.
TEST(Schedule, EveryRankMeetsCollectivesInOneGlobalOrder) {
  PlanBuilder b(2);
  const int g0 = b.group({0, 1}), g1 = b.group({0, 1}, "tp");
  const int x0 = b.collective(0, "all_reduce", g0, 64, "dp-comm");
  const int y0 = b.collective(0, "all_gather", g1, 64, "tp-comm");
  const int y1 = b.collective(1, "all_gather", g1, 64, "tp-comm");
  const int x1 = b.collective(1, "all_reduce", g0, 64, "dp-comm");
  const zv::Schedule s = zv::build_schedule(zv::parse_plan(b.doc()));
  const bool x_first_0 = position(s.ranks[0].order, x0) < position(s.ranks[0].order, y0);
  const bool x_first_1 = position(s.ranks[1].order, x1) < position(s.ranks[1].order, y1);
  EXPECT_EQ(x_first_0, x_first_1);
}

// Same two collectives on ONE stream per rank, in opposite orders: rank 0 waits in X for rank 1,
// which waits in Y for rank 0. The simulator would hang; the schedule refuses it and says where.
TEST(Schedule, RefusesCrossedCollectivesOnAStream) {
  PlanBuilder b(2);
  const int g0 = b.group({0, 1}), g1 = b.group({0, 1}, "tp");
  b.collective(0, "all_reduce", g0, 64, "compute");
  b.collective(0, "all_gather", g1, 64, "compute");
  b.collective(1, "all_gather", g1, 64, "compute");
  b.collective(1, "all_reduce", g0, 64, "compute");
  const std::string e = schedule_error(b.doc());
  EXPECT_NE(e.find("cannot finish"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 stream compute at op 0"), std::string::npos) << e;
  EXPECT_NE(e.find("waiting for ranks 1"), std::string::npos) << e;
}

TEST(Schedule, RefusesMembersThatDisagree) {
  PlanBuilder kinds(2);
  int g = kinds.group({0, 1});
  kinds.collective(0, "all_reduce", g, 64);
  kinds.collective(1, "all_gather", g, 64);
  EXPECT_NE(schedule_error(kinds.doc()).find("must agree"), std::string::npos);

  PlanBuilder sizes(2);
  g = sizes.group({0, 1});
  sizes.collective(0, "all_reduce", g, 64);
  sizes.collective(1, "all_reduce", g, 128);
  EXPECT_NE(schedule_error(sizes.doc()).find("must agree"), std::string::npos);

  PlanBuilder counts(2);
  g = counts.group({0, 1});
  counts.collective(0, "all_reduce", g, 64);
  counts.collective(0, "all_reduce", g, 64);
  counts.collective(1, "all_reduce", g, 64);
  EXPECT_NE(schedule_error(counts.doc()).find("holds 2 collectives"), std::string::npos);
}

TEST(Schedule, RefusesADependencyCycleAcrossStreams) {
  PlanBuilder b(1);
  b.add(0, {{"kind", "compute"}, {"stream", "compute"}, {"name", "a"}, {"deps", {1}}});
  b.add(0, {{"kind", "compute"}, {"stream", "cpu"}, {"name", "b"}, {"deps", {0}}});
  EXPECT_NE(schedule_error(b.doc()).find("waiting for deps"), std::string::npos);
  EXPECT_THROW(zv::build_local_schedule(zv::parse_plan(b.doc())), zv::ScheduleError);
}

// Point-to-point transfers are matched per (group, src, dst): rank 2 of a 3-rank group takes no
// part in rank 0 -> rank 1's send_recv and need not hold it.
TEST(Schedule, SendRecvMatchesOnlyItsTwoEnds) {
  PlanBuilder b(3);
  const int g = b.group({0, 1, 2}, "pp");
  auto sr = [&](int rank, int src, int dst) {
    b.add(rank, {{"kind", "collective"}, {"stream", "pp-comm"}, {"name", "p2p"},
                 {"deps", nlohmann::json::array()}, {"collective", "send_recv"}, {"group", g},
                 {"bytes", 32}, {"src", src}, {"dst", dst}});
  };
  sr(0, 0, 1);
  sr(1, 0, 1);
  sr(1, 1, 2);
  sr(2, 1, 2);
  const zv::Schedule s = zv::build_schedule(zv::parse_plan(b.doc()));
  EXPECT_EQ(s.collectives, 2);
}

TEST(Schedule, NeedsEveryRankButALocalOrderFollowsPredictedStarts) {
  PlanBuilder b(2);
  const int g = b.group({0, 1});
  b.compute(0, "late", "compute", {}, 5.0);
  b.collective(0, "all_reduce", g, 64, "dp-comm", {}, 1.0);
  auto doc = b.doc();
  doc["ranks"].erase(1);
  const zv::ReplayPlan p = zv::parse_plan(doc);
  EXPECT_FALSE(p.has_all_ranks());
  EXPECT_THROW(zv::build_schedule(p), zv::ScheduleError);
  const zv::Schedule s = zv::build_local_schedule(p);
  EXPECT_EQ(s.ranks[0].order, (std::vector<int>{1, 0}));
}

}  // namespace
