#include "sim/collective/nccl_tests.h"

namespace zerosim::nccl {

int type_size(DataType t) {
  switch (t) {
    case DataType::Int8:
    case DataType::Uint8:
    case DataType::F8e4m3:
    case DataType::F8e5m2: return 1;
    case DataType::Half:
    case DataType::Bfloat16: return 2;
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Float: return 4;
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Double: return 8;
  }
  return 4;
}

std::vector<DataType> all_types(const Constants& k) {
  std::vector<DataType> out;
  for (const auto& n : kDataTypeNames) {
    const bool fp8 = n.value == DataType::F8e4m3 || n.value == DataType::F8e5m2;
    if (!fp8 || k.fp8_types) out.push_back(n.value);
  }
  return out;
}

std::vector<RedOp> all_ops() {
  std::vector<RedOp> out;
  for (const auto& n : kRedOpNames) out.push_back(n.value);
  return out;
}

TestSize test_size(CollectiveKind kind, Bytes requested, DataType t, int n_ranks) {
  const std::int64_t ws = type_size(t);
  const std::int64_t count = requested / ws;
  const std::int64_t n = n_ranks < 1 ? 1 : n_ranks;
  // <coll>GetCollByteCount: base = (count / nranks) & ~(16 / eltSize - 1), so that every rank's
  // share starts 16-byte aligned.
  const std::int64_t base = (count / n) & ~(16 / ws - 1);
  switch (kind) {
    case CollectiveKind::AllGather:
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllToAll: return {base * n * ws, base};
    case CollectiveKind::AllReduce:
    case CollectiveKind::Broadcast:
    case CollectiveKind::Reduce:
    case CollectiveKind::SendRecv: return {count * ws, count};
  }
  return {count * ws, count};
}

const char* test_binary(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce_perf";
    case CollectiveKind::ReduceScatter: return "reduce_scatter_perf";
    case CollectiveKind::AllGather: return "all_gather_perf";
    case CollectiveKind::Broadcast: return "broadcast_perf";
    case CollectiveKind::Reduce: return "reduce_perf";
    case CollectiveKind::AllToAll: return "alltoall_perf";
    case CollectiveKind::SendRecv: return "sendrecv_perf";
  }
  return "?";
}

// sendrecv_perf iterates the ops like the reductions although it reduces nothing.
bool test_has_op(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter ||
         kind == CollectiveKind::Reduce || kind == CollectiveKind::SendRecv;
}

bool test_has_root(CollectiveKind kind) {
  return kind == CollectiveKind::Broadcast || kind == CollectiveKind::Reduce;
}

bool nvls_supports(const Constants& k, CollectiveKind kind, RedOp op, DataType t) {
  // NCCL offers NVLS for the reductions and all-gather only; nothing else is restricted.
  if (kind == CollectiveKind::Broadcast || kind == CollectiveKind::AllToAll ||
      kind == CollectiveKind::SendRecv) {
    return true;
  }
  if (kind == CollectiveKind::AllGather) {
    if (k.nvls_allgather_any_type) return true;
    op = RedOp::Sum;  // ncclAllGather runs as a sum (src/collectives.cc)
  }
  // src/enqueue.cc hostToDevRedOp: max and min become ncclDevMinMax; avg becomes
  // ncclDevSumPostDiv (integers) or ncclDevPreMulSum (floats), and mulsum ncclDevPreMulSum,
  // neither of which has an NVLS kernel.
  const bool sum = op == RedOp::Sum;
  const bool minmax = op == RedOp::Max || op == RedOp::Min;
  // ncclNvlsSupported (src/include/device.h, v2.21.5-1 and v2.27.7-1; NCCL_NVLS_SUPPORTS in
  // v2.18.5-1's collectives.h says the same).
  switch (t) {
    case DataType::Int32:
    case DataType::Uint32:
    case DataType::Int64:
    case DataType::Uint64:
    case DataType::Half:
    case DataType::Bfloat16: return sum || minmax;
    case DataType::Float:
    case DataType::Double: return sum;
    default: return false;
  }
}

}  // namespace zerosim::nccl
