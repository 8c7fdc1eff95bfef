#include "validate/gpu/nccl_collective.h"

#include <stdexcept>

#include "validate/gpu/gpu_check.h"

namespace zerosim::validate::gpu {

std::size_t nccl_type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    default: throw std::invalid_argument("nccl_type_size: unsupported NCCL data type");
  }
}

void launch_nccl(const NcclCall& c, ncclComm_t comm, cudaStream_t st) {
  const std::size_t es = nccl_type_size(c.dtype);
  const std::size_t part = c.count / static_cast<std::size_t>(c.n);
  const std::size_t mine = static_cast<std::size_t>(c.position) * part * es;
  switch (c.kind) {
    case CollKind::AllReduce:
      ZEROSIM_NCCL_CHECK(ncclAllReduce(c.buf, c.buf, c.count, c.dtype, ncclSum, comm, st));
      return;
    case CollKind::AllGather:
      ZEROSIM_NCCL_CHECK(ncclAllGather(c.buf + mine, c.buf, part, c.dtype, comm, st));
      return;
    case CollKind::ReduceScatter:
      ZEROSIM_NCCL_CHECK(ncclReduceScatter(c.buf, c.buf + mine, part, c.dtype, ncclSum, comm, st));
      return;
    case CollKind::Broadcast:
      ZEROSIM_NCCL_CHECK(ncclBroadcast(c.buf, c.buf, c.count, c.dtype, c.root, comm, st));
      return;
    case CollKind::Reduce:
      ZEROSIM_NCCL_CHECK(ncclReduce(c.buf, c.buf, c.count, c.dtype, ncclSum, c.root, comm, st));
      return;
    case CollKind::AllToAll:
      if (c.recv_buf == nullptr && part > 0) throw std::invalid_argument("launch_nccl: all_to_all needs recv_buf");
      ZEROSIM_NCCL_CHECK(ncclGroupStart());
      for (int p = 0; p < c.n; ++p) {
        const std::size_t off = static_cast<std::size_t>(p) * part * es;
        ZEROSIM_NCCL_CHECK(ncclSend(c.buf + off, part, c.dtype, p, comm, st));
        ZEROSIM_NCCL_CHECK(ncclRecv(c.recv_buf + off, part, c.dtype, p, comm, st));
      }
      ZEROSIM_NCCL_CHECK(ncclGroupEnd());
      return;
    case CollKind::SendRecv:
      if (c.position == c.src) {
        ZEROSIM_NCCL_CHECK(ncclSend(c.buf, c.count, c.dtype, c.dst, comm, st));
      } else if (c.position == c.dst) {
        ZEROSIM_NCCL_CHECK(ncclRecv(c.buf, c.count, c.dtype, c.src, comm, st));
      } else {
        throw std::invalid_argument("launch_nccl: send_recv on a rank that is neither end");
      }
      return;
  }
  throw std::invalid_argument("launch_nccl: unknown collective");
}

}  // namespace zerosim::validate::gpu
