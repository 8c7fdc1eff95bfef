#include "validate/busbw.h"

#include <stdexcept>

namespace zerosim::validate {

double busbw_factor(CollKind op, int nranks) {
  if (nranks < 1) throw std::invalid_argument("busbw_factor: nranks must be >= 1");
  const double n = nranks;
  switch (op) {
    case CollKind::AllReduce: return 2.0 * (n - 1) / n;
    case CollKind::AllGather:
    case CollKind::ReduceScatter:
    case CollKind::AllToAll: return (n - 1) / n;
    case CollKind::Broadcast:
    case CollKind::Reduce:
    case CollKind::SendRecv: return 1.0;
  }
  throw std::invalid_argument("busbw_factor: unknown collective");
}

Bandwidth nccl_tests_bandwidth(CollKind op, int nranks, std::int64_t bytes, double seconds) {
  if (!(seconds > 0)) throw std::invalid_argument("nccl_tests_bandwidth: seconds must be > 0");
  if (bytes < 0) throw std::invalid_argument("nccl_tests_bandwidth: bytes must be >= 0");
  Bandwidth b;
  b.algbw_GBps = static_cast<double>(bytes) / seconds / 1e9;
  b.busbw_GBps = b.algbw_GBps * busbw_factor(op, nranks);
  return b;
}

}  // namespace zerosim::validate
