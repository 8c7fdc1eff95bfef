#pragma once
// Bandwidth of a collective exactly as nccl-tests reports it (src/<collective>.cu, the *GetBw
// functions), so measured curves and zerosim's predictions plot on the same axes.
//
// `bytes` is the "size" column of nccl-tests and the plan's per-rank buffer size (NCCL's count x
// element size; all_gather: the gathered output; reduce_scatter: the input; all_to_all: the whole
// send buffer). Bandwidths are in GB/s with GB = 1e9 bytes:
//   algbw = bytes / seconds
//   busbw = algbw * factor, factor by collective over n ranks:
//     all_reduce 2(n-1)/n;  all_gather, reduce_scatter, all_to_all (n-1)/n;
//     broadcast, reduce, send_recv 1.
#include <cstdint>

#include "validate/plan_reader.h"

namespace zerosim::validate {

double busbw_factor(CollKind op, int nranks);

struct Bandwidth {
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};
Bandwidth nccl_tests_bandwidth(CollKind op, int nranks, std::int64_t bytes, double seconds);

}  // namespace zerosim::validate
