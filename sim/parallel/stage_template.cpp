#include "sim/parallel/stage_template.h"

namespace zerosim::plan_detail {

std::int32_t Emitter::intern(const std::string& n) {
  auto [it, inserted] =
      tables_.name_ids.emplace(n, static_cast<std::int32_t>(tables_.names.size()));
  if (inserted) tables_.names.push_back(n);
  return it->second;
}

std::int32_t Emitter::add(TemplateOp op, const std::string& name,
                          const std::vector<std::int32_t>& deps) {
  op.name = intern(name);
  op.dep_begin = static_cast<std::uint32_t>(t_.deps.size());
  for (std::int32_t x : deps) {
    if (x >= 0) t_.deps.push_back(x);
  }
  op.dep_count = static_cast<std::uint32_t>(t_.deps.size()) - op.dep_begin;
  t_.ops.push_back(op);
  return static_cast<std::int32_t>(t_.ops.size() - 1);
}

std::int32_t Emitter::work_op(OpKind kind, Work work, Stream stream, Phase phase,
                              const std::string& name, const std::vector<std::int32_t>& deps) {
  TemplateOp op;
  op.kind = kind;
  op.stream = stream;
  op.phase = phase;
  op.work = static_cast<std::int32_t>(tables_.works.size());
  if (kind == OpKind::Copy) op.bytes = work.elements;
  tables_.works.push_back(work);
  return add(op, name, deps);
}

std::int32_t Emitter::memory_op(OpKind kind, MemCategory c, Bytes bytes, const std::string& name,
                               Stream stream, const std::vector<std::int32_t>& deps) {
  TemplateOp op;
  op.kind = kind;
  op.stream = stream;
  op.category = c;
  op.bytes = bytes;
  return add(op, (kind == OpKind::Alloc ? "alloc " : "free ") + name, deps);
}

std::int32_t Emitter::alloc_tensors(MemCategory c, Bytes bytes, const std::string& name,
                                   const std::vector<double>& tensors, Stream stream,
                                   const std::vector<std::int32_t>& deps) {
  const std::int32_t id = alloc(c, bytes, name, stream, deps);
  double total = 0;
  for (double t : tensors) total += t;
  if (tensors.size() < 2 || total <= 0 || bytes <= 0) return id;
  std::vector<Bytes>& sizes = tables_.alloc_tensors[{t_.ops[id].name, bytes}];
  if (!sizes.empty()) return id;
  Bytes left = bytes;
  std::size_t largest = 0;
  for (double t : tensors) {
    const Bytes b = static_cast<Bytes>(static_cast<double>(bytes) * (t / total));
    if (b <= 0) continue;
    if (sizes.empty() || b > sizes[largest]) largest = sizes.size();
    sizes.push_back(b);
    left -= b;
  }
  // What the proportions' rounding left over goes to the largest tensor.
  if (sizes.empty()) sizes.push_back(0);
  sizes[largest] += left;
  return id;
}

std::int32_t Emitter::compute(WorkKind k, Phase phase, const std::string& name,
                              std::vector<std::int32_t> deps, BackwardPart part) {
  TemplateOp op;
  op.kind = OpKind::Compute;
  op.phase = phase;
  op.work = tables_.work_of[work_index(k, part)];
  deps.insert(deps.end(), host_waits_.begin(), host_waits_.end());
  host_waits_.clear();
  return add(op, name, deps);
}

std::int32_t Emitter::collective(Peer peer, CollectiveKind k, Bytes bytes, Stream stream,
                                 const std::string& name, const std::vector<std::int32_t>& deps) {
  TemplateOp op;
  op.kind = OpKind::Collective;
  op.stream = stream;
  op.phase = Phase::Communication;
  op.bytes = bytes;
  op.peer = peer;
  auto& list = t_.instances[static_cast<int>(peer)];
  op.instance = static_cast<std::int32_t>(list.size());
  list.push_back({k, bytes});
  return add(op, name, deps);
}

}  // namespace zerosim::plan_detail
