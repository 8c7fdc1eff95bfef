// validate/plan_reader: what a "zerosim-plan/1" document turns into, and the errors (each naming
// the JSON path) for documents the replay cannot trust.
#include <gtest/gtest.h>

#include <string>

#include "tests/validate/plan_builders.h"
#include "validate/plan_reader.h"

namespace zv = zerosim::validate;
using zerosim::validate::test::PlanBuilder;

namespace {

std::string parse_error(const nlohmann::json& doc) {
  try {
    zv::parse_plan(doc);
  } catch (const zv::PlanError& e) {
    return e.what();
  }
  return "";
}

TEST(PlanReader, ReadsGroupsOpsAndTheirFields) {
  PlanBuilder b(2);
  const int g = b.group({0, 1});
  b.compute(0, "fwd");
  b.collective(0, "all_reduce", g, 4096, "dp-comm", {0});
  b.compute(1, "fwd");
  b.collective(1, "all_reduce", g, 4096, "dp-comm", {0});
  b.add(1, {{"kind", "alloc"}, {"stream", "compute"}, {"name", "alloc x"}, {"deps", nlohmann::json::array()},
            {"category", "activations"}, {"bytes", 100}});
  b.add(1, {{"kind", "copy"}, {"stream", "h2d"}, {"name", "params in"}, {"deps", nlohmann::json::array()},
            {"bytes", 1 << 20}});
  const zv::ReplayPlan p = zv::parse_plan(b.doc());
  ASSERT_EQ(p.num_ranks, 2);
  ASSERT_TRUE(p.has_all_ranks());
  ASSERT_EQ(p.groups.size(), 1u);
  EXPECT_EQ(p.groups[0].position_of(1), 1);
  EXPECT_EQ(p.groups[0].position_of(5), -1);
  const zv::PlanOp& c = p.ranks[0].ops[1];
  EXPECT_EQ(c.kind, zv::OpKind::Collective);
  EXPECT_EQ(c.stream, zv::StreamId::DpComm);
  EXPECT_EQ(c.collective, zv::CollKind::AllReduce);
  EXPECT_EQ(c.bytes, 4096);
  EXPECT_EQ(c.deps, std::vector<int>{0});
  EXPECT_DOUBLE_EQ(c.predicted_duration_s, 2e-3);
  const zv::PlanOp& f = p.ranks[0].ops[0];
  ASSERT_EQ(f.gemms.size(), 1u);
  EXPECT_EQ(f.gemms[0].m * f.gemms[0].n * f.gemms[0].k, 512);
  EXPECT_EQ(p.ranks[1].ops[2].category, "activations");
  EXPECT_EQ(p.ranks[1].ops[3].stream, zv::StreamId::H2D);
  EXPECT_EQ(p.ranks[1].ops[3].bytes, 1 << 20);
  EXPECT_EQ(p.precision(), "bf16");
}

TEST(PlanReader, SendRecvWithoutEndsGoesFromTheGroupsFirstRankToItsSecond) {
  PlanBuilder b(2);
  const int g = b.group({1, 0}, "pp");
  b.collective(0, "send_recv", g, 64, "pp-comm");
  b.collective(1, "send_recv", g, 64, "pp-comm");
  const zv::ReplayPlan p = zv::parse_plan(b.doc());
  EXPECT_EQ(p.ranks[0].ops[0].src, 1);
  EXPECT_EQ(p.ranks[0].ops[0].dst, 0);
}

TEST(PlanReader, RefusesBadDocumentsNamingThePath) {
  PlanBuilder b(2);
  const int g = b.group({0, 1});
  b.collective(0, "all_reduce", g, 8);
  b.collective(1, "all_reduce", g, 8);
  const nlohmann::json good = b.doc();
  ASSERT_EQ(parse_error(good), "");

  auto bad = good;
  bad["format"] = "zerosim-plan/0";
  EXPECT_NE(parse_error(bad).find("plan.format"), std::string::npos);

  bad = good;
  bad["ranks"][0]["ops"][0]["id"] = 3;
  EXPECT_NE(parse_error(bad).find("ranks[0].ops[0].id"), std::string::npos);

  bad = good;
  bad["ranks"][1]["ops"][0]["deps"] = {7};
  EXPECT_NE(parse_error(bad).find("does not exist"), std::string::npos);

  bad = good;
  bad["ranks"][1]["ops"][0]["deps"] = {0};
  EXPECT_NE(parse_error(bad).find("ranks[1].ops[0].deps[0]"), std::string::npos);

  bad = good;
  bad["ranks"][0]["ops"][0]["stream"] = "nvlink";
  const std::string e = parse_error(bad);
  EXPECT_NE(e.find("ranks[0].ops[0].stream"), std::string::npos) << e;
  EXPECT_NE(e.find("dp-comm"), std::string::npos) << "lists the allowed streams: " << e;

  bad = good;
  bad["ranks"][0]["ops"][0]["collective"] = "all_scatter";
  EXPECT_NE(parse_error(bad).find("all_reduce"), std::string::npos);

  bad = good;
  bad["groups"][0]["ranks"] = {1};
  EXPECT_NE(parse_error(bad).find("not a member"), std::string::npos);

  bad = good;
  bad["groups"][0]["ranks"] = {0, 2};
  EXPECT_NE(parse_error(bad).find("groups[0].ranks[1]"), std::string::npos);

  bad = good;
  bad["ranks"][0]["ops"][0]["bytes"] = -1;
  EXPECT_NE(parse_error(bad).find("ranks[0].ops[0].bytes"), std::string::npos);

  bad = good;
  bad["ranks"][0]["ops"][0]["group"] = 4;
  EXPECT_NE(parse_error(bad).find("not one of the 1 groups"), std::string::npos);
}

TEST(PlanReader, ReadsWhatTheSimulatorExports) {
  const auto doc = zerosim::validate::test::simulated_plan(
      zerosim::validate::test::tiny_scenario({{"zero", {{"stage", 3}}}}));
  const zv::ReplayPlan p = zv::parse_plan(doc);
  EXPECT_EQ(p.num_ranks, 2);
  EXPECT_TRUE(p.has_all_ranks());
  int collectives = 0, optimizer = 0;
  for (const auto& op : p.ranks[0].ops) {
    collectives += op.kind == zv::OpKind::Collective;
    optimizer += op.work == "optimizer_step";
    if (op.work == "optimizer_step") {
      EXPECT_GT(op.elements, 0);
    }
  }
  EXPECT_GT(collectives, 0);
  EXPECT_EQ(optimizer, 1);
}

}  // namespace
