// Chrome trace event format (the JSON Perfetto and chrome://tracing open): one process per rank,
// one thread per stream, a complete ("X") event per op, and a memory counter per rank.
#include <cstdio>

#include "sim/memory/memory_timeline.h"
#include "sim/report/report.h"

namespace zerosim {
namespace {

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

}  // namespace

void write_chrome_trace(std::ostream& out, const Simulation& sim) {
  const Plan& plan = sim.plan.plan;
  const EngineResult& r = sim.result;
  out << "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto sep = [&]() {
    if (!first) out << ",\n";
    first = false;
  };
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    sep();
    out << "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" << rank
        << ",\"args\":{\"name\":\"rank " << rank << "\"}}";
    for (int s = 0; s < kNumStreams; ++s) {
      sep();
      out << "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" << rank << ",\"tid\":" << s
          << ",\"args\":{\"name\":\"" << stream_name(static_cast<Stream>(s)) << "\"}}";
    }
  }
  for (OpId id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.kind == OpKind::Alloc || op.kind == OpKind::Free) continue;
    sep();
    out << "{\"ph\":\"X\",\"name\":";
    write_escaped(out, plan.names[op.name]);
    out << ",\"cat\":\"" << phase_name(op.phase) << "\",\"pid\":" << op.rank
        << ",\"tid\":" << static_cast<int>(op.stream) << ",\"ts\":" << micros(r.start[id])
        << ",\"dur\":" << micros(r.end[id] - r.start[id]);
    if (op.kind == OpKind::Collective) {
      const Collective& c = plan.collectives[op.work];
      out << ",\"args\":{\"collective\":\"" << collective_name(c.kind) << "\",\"bytes\":" << c.bytes
          << ",\"group\":\"" << plan.group_names[c.group] << "\"}";
    }
    out << "}";
  }
  std::vector<int> all(static_cast<std::size_t>(plan.num_ranks));
  for (int rank = 0; rank < plan.num_ranks; ++rank) all[rank] = rank;
  std::vector<MemoryUsage> usage = replay_memory(plan, r, all, true);
  for (int rank = 0; rank < plan.num_ranks; ++rank) {
    for (const auto& [t, bytes] : usage[rank].timeline) {
      sep();
      out << "{\"ph\":\"C\",\"name\":\"memory (GiB)\",\"pid\":" << rank << ",\"ts\":" << micros(t)
          << ",\"args\":{\"allocated\":" << static_cast<double>(bytes) / kGiB << "}}";
    }
  }
  out << "\n]}\n";
}

}  // namespace zerosim
