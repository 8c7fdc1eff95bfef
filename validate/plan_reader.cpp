#include "validate/plan_reader.h"

#include <algorithm>
#include <array>
#include <fstream>
#include <sstream>

namespace zerosim::validate {
namespace {

using json = nlohmann::json;

constexpr std::array<const char*, 5> kOpKindNames{"compute", "collective", "copy", "alloc", "free"};
constexpr std::array<const char*, kNumStreams> kStreamNames{
    "compute", "dp-comm", "tp-comm", "pp-comm", "pp-recv", "h2d", "d2h", "cpu"};
constexpr std::array<const char*, 7> kCollNames{"all_reduce", "reduce_scatter", "all_gather",
                                                "broadcast",  "reduce",         "all_to_all",
                                                "send_recv"};

template <std::size_t N>
int lookup(const std::array<const char*, N>& names, const std::string& value,
           const std::string& path) {
  for (std::size_t i = 0; i < N; ++i) {
    if (value == names[i]) return static_cast<int>(i);
  }
  std::string allowed;
  for (const char* n : names) allowed += (allowed.empty() ? "" : ", ") + std::string(n);
  throw PlanError(path + ": unknown value '" + value + "'; allowed: " + allowed);
}

const json& member(const json& obj, const char* key, const std::string& path) {
  auto it = obj.find(key);
  if (it == obj.end()) throw PlanError(path + ": missing key '" + key + "'");
  return *it;
}

std::int64_t get_int(const json& obj, const char* key, const std::string& path,
                     std::int64_t min_value = 0) {
  const json& v = member(obj, key, path);
  const std::string p = path + "." + key;
  if (!v.is_number_integer()) throw PlanError(p + ": expected an integer, got " + v.dump());
  const auto x = v.get<std::int64_t>();
  if (x < min_value) {
    throw PlanError(p + ": must be >= " + std::to_string(min_value) + ", got " + std::to_string(x));
  }
  return x;
}

double get_number(const json& obj, const char* key, const std::string& path, double fallback) {
  auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (!it->is_number()) throw PlanError(path + "." + key + ": expected a number, got " + it->dump());
  const double x = it->get<double>();
  if (!(x >= 0)) throw PlanError(path + "." + key + ": must be >= 0, got " + it->dump());
  return x;
}

std::string get_string(const json& obj, const char* key, const std::string& path) {
  const json& v = member(obj, key, path);
  if (!v.is_string()) throw PlanError(path + "." + key + ": expected a string, got " + v.dump());
  return v.get<std::string>();
}

const json& get_array(const json& obj, const char* key, const std::string& path) {
  const json& v = member(obj, key, path);
  if (!v.is_array()) throw PlanError(path + "." + key + ": expected an array");
  return v;
}

PlanOp parse_op(const json& o, int index, int rank, const ReplayPlan& plan, const std::string& path) {
  if (!o.is_object()) throw PlanError(path + ": expected an object");
  PlanOp op;
  op.id = static_cast<int>(get_int(o, "id", path));
  if (op.id != index) {
    throw PlanError(path + ".id: ops must be listed by id (0, 1, ...); expected " +
                    std::to_string(index) + ", got " + std::to_string(op.id));
  }
  op.kind = static_cast<OpKind>(lookup(kOpKindNames, get_string(o, "kind", path), path + ".kind"));
  op.stream =
      static_cast<StreamId>(lookup(kStreamNames, get_string(o, "stream", path), path + ".stream"));
  op.name = get_string(o, "name", path);
  if (auto it = o.find("phase"); it != o.end() && it->is_string()) op.phase = it->get<std::string>();
  const json& deps = get_array(o, "deps", path);
  for (std::size_t i = 0; i < deps.size(); ++i) {
    const std::string p = path + ".deps[" + std::to_string(i) + "]";
    if (!deps[i].is_number_integer()) throw PlanError(p + ": expected an op id");
    const auto d = deps[i].get<std::int64_t>();
    if (d < 0 || d == index) {
      throw PlanError(p + ": " + std::to_string(d) + " is not another op of rank " +
                      std::to_string(rank));
    }
    op.deps.push_back(static_cast<int>(d));  // upper bound checked once the rank is read
  }
  op.predicted_start_s = get_number(o, "predicted_start_s", path, 0);
  op.predicted_duration_s = get_number(o, "predicted_duration_s", path, 0);

  switch (op.kind) {
    case OpKind::Compute: {
      if (auto it = o.find("work"); it != o.end() && it->is_string()) op.work = it->get<std::string>();
      if (auto it = o.find("gemms"); it != o.end()) {
        if (!it->is_array()) throw PlanError(path + ".gemms: expected an array");
        for (std::size_t i = 0; i < it->size(); ++i) {
          const std::string p = path + ".gemms[" + std::to_string(i) + "]";
          const json& g = (*it)[i];
          GemmShape s;
          if (auto n = g.find("name"); n != g.end() && n->is_string()) s.name = n->get<std::string>();
          s.m = get_int(g, "m", p, 1);
          s.n = get_int(g, "n", p, 1);
          s.k = get_int(g, "k", p, 1);
          s.count = g.contains("count") ? get_int(g, "count", p, 0) : 1;
          op.gemms.push_back(std::move(s));
        }
      }
      op.attention_flops = get_number(o, "attention_flops", path, 0);
      op.elementwise_bytes = get_number(o, "elementwise_bytes", path, 0);
      if (o.contains("elements")) op.elements = get_int(o, "elements", path);
      break;
    }
    case OpKind::Collective: {
      op.collective = static_cast<CollKind>(
          lookup(kCollNames, get_string(o, "collective", path), path + ".collective"));
      op.group = static_cast<int>(get_int(o, "group", path));
      if (op.group >= static_cast<int>(plan.groups.size())) {
        throw PlanError(path + ".group: " + std::to_string(op.group) + " is not one of the " +
                        std::to_string(plan.groups.size()) + " groups");
      }
      const PlanGroup& g = plan.groups[op.group];
      if (g.position_of(rank) < 0) {
        throw PlanError(path + ".group: rank " + std::to_string(rank) + " is not a member of group " +
                        g.name);
      }
      op.bytes = get_int(o, "bytes", path);
      if (op.collective == CollKind::SendRecv) {
        const bool explicit_ends = o.contains("src") || o.contains("dst");
        if (explicit_ends) {
          op.src = static_cast<int>(get_int(o, "src", path));
          op.dst = static_cast<int>(get_int(o, "dst", path));
        } else {
          if (g.ranks.size() != 2) {
            throw PlanError(path + ": send_recv without 'src'/'dst' needs a group of 2 ranks; group " +
                            g.name + " has " + std::to_string(g.ranks.size()));
          }
          op.src = g.ranks[0];
          op.dst = g.ranks[1];
        }
        if (op.src == op.dst || g.position_of(op.src) < 0 || g.position_of(op.dst) < 0 ||
            (rank != op.src && rank != op.dst)) {
          throw PlanError(path + ": send_recv from " + std::to_string(op.src) + " to " +
                          std::to_string(op.dst) + " must join two members of group " + g.name +
                          ", one of them rank " + std::to_string(rank));
        }
      }
      break;
    }
    case OpKind::Copy:
      if (o.contains("bytes")) op.bytes = get_int(o, "bytes", path);
      break;
    case OpKind::Alloc:
    case OpKind::Free:
      op.bytes = get_int(o, "bytes", path);
      if (auto it = o.find("category"); it != o.end() && it->is_string()) op.category = it->get<std::string>();
      break;
  }
  return op;
}

}  // namespace

const char* to_string(OpKind k) { return kOpKindNames[static_cast<int>(k)]; }
const char* to_string(StreamId s) { return kStreamNames[static_cast<int>(s)]; }
const char* to_string(CollKind k) { return kCollNames[static_cast<int>(k)]; }

int PlanGroup::position_of(int world_rank) const {
  auto it = std::find(ranks.begin(), ranks.end(), world_rank);
  return it == ranks.end() ? -1 : static_cast<int>(it - ranks.begin());
}

const RankOps* ReplayPlan::find_rank(int rank) const {
  for (const RankOps& r : ranks) {
    if (r.rank == rank) return &r;
  }
  return nullptr;
}

std::string ReplayPlan::precision() const {
  if (scenario.is_object()) {
    auto t = scenario.find("training");
    if (t != scenario.end() && t->is_object()) {
      auto p = t->find("precision");
      if (p != t->end() && p->is_string()) return p->get<std::string>();
    }
  }
  return "bf16";
}

ReplayPlan parse_plan(const json& doc) {
  if (!doc.is_object()) throw PlanError("plan: expected a JSON object");
  const std::string format = get_string(doc, "format", "plan");
  if (format != "zerosim-plan/1") {
    throw PlanError("plan.format: expected \"zerosim-plan/1\", got \"" + format + "\"");
  }
  ReplayPlan plan;
  plan.num_ranks = static_cast<int>(get_int(doc, "num_ranks", "plan", 1));
  if (auto it = doc.find("scenario"); it != doc.end()) plan.scenario = *it;

  const json& groups = get_array(doc, "groups", "plan");
  for (std::size_t i = 0; i < groups.size(); ++i) {
    const std::string p = "groups[" + std::to_string(i) + "]";
    const json& g = groups[i];
    PlanGroup pg;
    pg.id = static_cast<int>(get_int(g, "id", p));
    if (pg.id != static_cast<int>(i)) {
      throw PlanError(p + ".id: groups must be listed by id; expected " + std::to_string(i));
    }
    pg.name = g.contains("name") ? get_string(g, "name", p) : "group" + std::to_string(i);
    pg.kind = g.contains("kind") ? get_string(g, "kind", p) : "";
    const json& ranks = get_array(g, "ranks", p);
    if (ranks.empty()) throw PlanError(p + ".ranks: a group needs at least one rank");
    for (std::size_t j = 0; j < ranks.size(); ++j) {
      const std::string rp = p + ".ranks[" + std::to_string(j) + "]";
      if (!ranks[j].is_number_integer()) throw PlanError(rp + ": expected a rank");
      const auto r = ranks[j].get<std::int64_t>();
      if (r < 0 || r >= plan.num_ranks) {
        throw PlanError(rp + ": rank " + std::to_string(r) + " outside 0.." +
                        std::to_string(plan.num_ranks - 1));
      }
      if (pg.position_of(static_cast<int>(r)) >= 0) {
        throw PlanError(rp + ": rank " + std::to_string(r) + " listed twice");
      }
      pg.ranks.push_back(static_cast<int>(r));
    }
    if (auto cr = g.find("cluster_ranks"); cr != g.end() && cr->is_array() && cr->size() != pg.ranks.size()) {
      throw PlanError(p + ".cluster_ranks: the plan is folded (one replica stands for " +
                      std::to_string(cr->size()) + " ranks of group " + pg.name +
                      "); export it with sim.ranks=all to replay it on hardware");
    }
    plan.groups.push_back(std::move(pg));
  }

  const json& ranks = get_array(doc, "ranks", "plan");
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    const std::string p = "ranks[" + std::to_string(i) + "]";
    RankOps ro;
    ro.rank = static_cast<int>(get_int(ranks[i], "rank", p));
    if (ro.rank >= plan.num_ranks) {
      throw PlanError(p + ".rank: " + std::to_string(ro.rank) + " is not below num_ranks " +
                      std::to_string(plan.num_ranks));
    }
    if (!plan.ranks.empty() && ro.rank <= plan.ranks.back().rank) {
      throw PlanError(p + ".rank: ranks must be listed once each, ascending");
    }
    const json& ops = get_array(ranks[i], "ops", p);
    ro.ops.reserve(ops.size());
    for (std::size_t j = 0; j < ops.size(); ++j) {
      ro.ops.push_back(parse_op(ops[j], static_cast<int>(j), ro.rank, plan,
                                p + ".ops[" + std::to_string(j) + "]"));
    }
    for (const PlanOp& op : ro.ops) {
      for (int d : op.deps) {
        if (d >= static_cast<int>(ro.ops.size())) {
          throw PlanError(p + ".ops[" + std::to_string(op.id) + "].deps: op " + std::to_string(d) +
                          " does not exist (rank " + std::to_string(ro.rank) + " has " +
                          std::to_string(ro.ops.size()) + " ops)");
        }
      }
    }
    plan.ranks.push_back(std::move(ro));
  }
  if (plan.ranks.empty()) throw PlanError("plan.ranks: the plan holds no rank");
  return plan;
}

ReplayPlan read_plan_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw PlanError(path + ": cannot open the plan file");
  json doc;
  try {
    in >> doc;
  } catch (const json::exception& e) {
    throw PlanError(path + ": not valid JSON: " + e.what());
  }
  try {
    return parse_plan(doc);
  } catch (const PlanError& e) {
    throw PlanError(path + ": " + e.what());
  }
}

}  // namespace zerosim::validate
