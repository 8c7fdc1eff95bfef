// Chrome trace event format (the JSON Perfetto and chrome://tracing open): one process per traced
// rank, one thread per stream, a complete ("X") event per op, and a memory counter per rank.
//
// Every rank writes its whole op list, so a full trace grows with ranks x ops per rank (120 MB
// for llama2-70b on 32 nodes, TP 8 x PP 4, for one step). The default keeps the first rank of each
// pipeline stage: TP ranks of a stage and data-parallel replicas run the same ops, so these few
// hold every op of the step once, and the size follows the layers and micro-batches, not the
// number of GPUs.
#include <algorithm>
#include <charconv>
#include <cstdio>

#include "sim/core/error.h"
#include "sim/memory/memory_timeline.h"
#include "sim/report/report.h"

namespace zerosim {
namespace {

using json = nlohmann::json;

const char* const kFlag = "--trace-ranks";

void write_escaped(std::ostream& out, const std::string& s) {
  out << '"';
  for (char c : s) {
    if (c == '"' || c == '\\') out << '\\' << c;
    else if (static_cast<unsigned char>(c) < 0x20) out << ' ';
    else out << c;
  }
  out << '"';
}

std::string micros(SimTime t) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6f", static_cast<double>(t) / kPicosPerMicro);
  return buf;
}

// One rank number of a --trace-ranks list; InputError for anything but a decimal below `limit`.
int parse_rank(const std::string& item, const std::string& spec, int limit) {
  int v = -1;
  const char* end = item.data() + item.size();
  const auto [ptr, ec] = std::from_chars(item.data(), end, v);
  if (item.empty() || ec != std::errc() || ptr != end) {
    throw InputError(kFlag, "expected stages, all, or ranks and ranges such as 0,8,16 or 0-7; "
                            "got '" + spec + "'");
  }
  if (v >= limit) {
    throw InputError(kFlag, "rank " + item + " is not below the cluster's " +
                                std::to_string(limit) + " GPUs");
  }
  return v;
}

// The cluster rank each plan rank stands for (the plan ranks themselves unless folded).
int cluster_rank(const Plan& plan, int plan_rank) {
  return plan.real_rank.empty() ? plan_rank : plan.real_rank[plan_rank];
}

// "0-7,64-71,128": ascending ranks with runs as ranges.
std::string rank_ranges(const std::vector<int>& sorted_ranks) {
  std::string out;
  for (std::size_t i = 0; i < sorted_ranks.size();) {
    std::size_t j = i;
    while (j + 1 < sorted_ranks.size() && sorted_ranks[j + 1] == sorted_ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(sorted_ranks[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(sorted_ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

}  // namespace

TraceRankSpec parse_trace_ranks(const std::string& spec, int num_gpus) {
  TraceRankSpec out;
  out.text = spec;
  if (spec == "stages") return out;
  if (spec == "all") {
    out.kind = TraceRankSpec::All;
    return out;
  }
  out.kind = TraceRankSpec::List;
  std::size_t begin = 0;
  while (begin <= spec.size()) {
    std::size_t comma = spec.find(',', begin);
    if (comma == std::string::npos) comma = spec.size();
    const std::string item = spec.substr(begin, comma - begin);
    const std::size_t dash = item.find('-');
    if (dash == std::string::npos) {
      out.ranks.push_back(parse_rank(item, spec, num_gpus));
    } else {
      const int lo = parse_rank(item.substr(0, dash), spec, num_gpus);
      const int hi = parse_rank(item.substr(dash + 1), spec, num_gpus);
      if (hi < lo) throw InputError(kFlag, "range " + item + " runs backwards");
      for (int r = lo; r <= hi; ++r) out.ranks.push_back(r);
    }
    begin = comma + 1;
  }
  std::sort(out.ranks.begin(), out.ranks.end());
  out.ranks.erase(std::unique(out.ranks.begin(), out.ranks.end()), out.ranks.end());
  return out;
}

TraceRanks select_trace_ranks(const Simulation& sim, const TraceRankSpec& spec, int num_gpus) {
  const Plan& plan = sim.plan.plan;
  TraceRanks out;
  out.num_gpus = num_gpus;
  std::string why;
  switch (spec.kind) {
    case TraceRankSpec::Stages: {
      std::vector<char> seen(static_cast<std::size_t>(plan.num_ranks), 0);  // by stage
      for (int r = 0; r < plan.num_ranks; ++r) {
        const int stage = sim.plan.stage_of_rank[r];
        if (!seen[stage]) out.plan_ranks.push_back(r);
        seen[stage] = 1;
      }
      why = "the first rank of each pipeline stage; --trace-ranks all or a list for more";
      break;
    }
    case TraceRankSpec::All:
      for (int r = 0; r < plan.num_ranks; ++r) out.plan_ranks.push_back(r);
      why = plan.num_ranks < num_gpus ? "every simulated rank: with sim.ranks=folded the first "
                                        "data-parallel replica stands for the others"
                                      : "every rank";
      break;
    case TraceRankSpec::List: {
      std::vector<int> plan_of(static_cast<std::size_t>(num_gpus), -1);
      for (int r = 0; r < plan.num_ranks; ++r) plan_of[cluster_rank(plan, r)] = r;
      std::vector<int> simulated;
      for (int r = 0; r < num_gpus; ++r) {
        if (plan_of[r] >= 0) simulated.push_back(r);
      }
      for (int r : spec.ranks) {
        if (plan_of[r] < 0) {
          throw InputError(kFlag, "rank " + std::to_string(r) +
                                      " is not simulated: with sim.ranks=folded the ranks of the "
                                      "first data-parallel replica (" + rank_ranges(simulated) +
                                      ") stand for the others; name those or --set sim.ranks=all");
        }
        out.plan_ranks.push_back(plan_of[r]);
      }
      std::sort(out.plan_ranks.begin(), out.plan_ranks.end());
      why = "as --trace-ranks asked";
      break;
    }
  }
  for (int r : out.plan_ranks) out.cluster_ranks.push_back(cluster_rank(plan, r));
  std::sort(out.cluster_ranks.begin(), out.cluster_ranks.end());
  out.summary = std::to_string(out.cluster_ranks.size()) + " of " + std::to_string(num_gpus) +
                " ranks (" + rank_ranges(out.cluster_ranks) + ": " + why + ")";
  return out;
}

void write_chrome_trace(std::ostream& out, const Simulation& sim, const TraceRanks& ranks) {
  const Plan& plan = sim.plan.plan;
  const EngineResult& r = sim.result;
  std::vector<char> traced(static_cast<std::size_t>(plan.num_ranks), 0);
  for (int rank : ranks.plan_ranks) traced[rank] = 1;
  // Processes are named and numbered by cluster rank, so a folded plan's stage-1 rank reads as
  // the GPU it stands for (rank 64 with TP 8 x DP 8), not as its index in the plan.
  const json other = {{"traced_ranks", ranks.cluster_ranks},
                      {"num_gpus", ranks.num_gpus},
                      {"trace_ranks", ranks.summary}};
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << other.dump() << ",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() {
    if (!first) out << ",\n";
    first = false;
  };
  for (int rank : ranks.plan_ranks) {
    const int pid = cluster_rank(plan, rank);
    sep();
    out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << pid
        << ",\"args\":{\"name\":\"rank " << pid << "\"}}";
    for (int s = 0; s < kNumStreams; ++s) {
      sep();
      out << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << pid << ",\"tid\":" << s
          << ",\"args\":{\"name\":\"" << stream_name(static_cast<Stream>(s)) << "\"}}";
    }
  }
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.kind == OpKind::Alloc || op.kind == OpKind::Free || !traced[op.rank]) continue;
    sep();
    out << "{\"ph\":\"X\",\"name\":";
    write_escaped(out, plan.names[op.name]);
    out << ",\"cat\":\"" << phase_name(op.phase) << "\",\"pid\":" << cluster_rank(plan, op.rank)
        << ",\"tid\":" << static_cast<int>(op.stream) << ",\"ts\":" << micros(r.start[id])
        << ",\"dur\":" << micros(r.end[id] - r.start[id]);
    if (op.kind == OpKind::Collective) {
      const Collective& c = plan.collectives[op.work];
      out << ",\"args\":{\"collective\":\"" << collective_name(c.kind) << "\",\"bytes\":" << c.bytes
          << ",\"group\":\"" << plan.group_names[c.group] << "\"}";
    }
    out << "}";
  }
  std::vector<MemoryUsage> usage = replay_memory(plan, r, ranks.plan_ranks, true);
  for (std::size_t i = 0; i < ranks.plan_ranks.size(); ++i) {
    const int pid = cluster_rank(plan, ranks.plan_ranks[i]);
    for (const auto& [t, bytes] : usage[i].timeline) {
      sep();
      out << "{\"ph\":\"C\",\"name\":\"memory (GiB)\",\"pid\":" << pid << ",\"ts\":" << micros(t)
          << ",\"args\":{\"allocated\":" << static_cast<double>(bytes) / kGiB << "}}";
    }
  }
  out << "\n]}\n";
}

}  // namespace zerosim
