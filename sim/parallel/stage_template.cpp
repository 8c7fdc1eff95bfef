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
