#pragma once
// What an nccl-tests run (github.com/NVIDIA/nccl-tests) feeds NCCL for a requested size, so that
// a prediction can be laid next to a measured log row by row:
//   - NCCL's data types and reduction ops under nccl-tests' names (-d, -o; src/common.cu
//     test_typenames, test_opnames) and what `-d all` / `-o all` iterate over;
//   - the buffer sizes of one row (common.cu setupArgs and each test's GetCollByteCount): the
//     "size" column is max(send, receive) bytes and the "count" column NCCL's count argument;
//   - the binary that runs each collective and which columns it fills (redop "none" and
//     root -1 where a test has none);
//   - the one way the op and type change NCCL's choice: NVLS runs only the (op, type) pairs
//     NCCL compiled multimem kernels for. NCCL's cost model is otherwise blind to both.
// Facts are read from nccl-tests v2.19.6 (src/*.cu) and NCCL's tags in nccl_constants.cpp.
#include <cstdint>
#include <vector>

#include "sim/collective/nccl_constants.h"
#include "sim/core/enum_names.h"
#include "sim/core/plan.h"

namespace zerosim::nccl {

// ncclDataType_t in NCCL's order (src/nccl.h.in).
enum class DataType : std::uint8_t {
  Int8, Uint8, Int32, Uint32, Int64, Uint64, Half, Float, Double, Bfloat16, F8e4m3, F8e5m2
};
inline constexpr EnumName<DataType> kDataTypeNames[] = {
    {DataType::Int8, "int8"},         {DataType::Uint8, "uint8"},   {DataType::Int32, "int32"},
    {DataType::Uint32, "uint32"},     {DataType::Int64, "int64"},   {DataType::Uint64, "uint64"},
    {DataType::Half, "half"},         {DataType::Float, "float"},   {DataType::Double, "double"},
    {DataType::Bfloat16, "bfloat16"}, {DataType::F8e4m3, "f8e4m3"}, {DataType::F8e5m2, "f8e5m2"}};
int type_size(DataType t);

// The reductions nccl-tests offers; mulsum is ncclRedOpCreatePreMulSum.
enum class RedOp : std::uint8_t { Sum, Prod, Max, Min, Avg, MulSum };
inline constexpr EnumName<RedOp> kRedOpNames[] = {{RedOp::Sum, "sum"}, {RedOp::Prod, "prod"},
                                                  {RedOp::Max, "max"}, {RedOp::Min, "min"},
                                                  {RedOp::Avg, "avg"}, {RedOp::MulSum, "mulsum"}};

// `-d all` and `-o all` with this NCCL: the fp8 types exist from 2.24.
std::vector<DataType> all_types(const Constants& k);
std::vector<RedOp> all_ops();

// One row's sizes for a requested size in bytes over n ranks. Per-rank shares (all-gather,
// reduce-scatter, all-to-all) are trimmed to 16-byte multiples, as nccl-tests does since v2.13.12.
struct TestSize {
  Bytes bytes = 0;         // "size": the collective's nBytes, zerosim's `bytes`
  std::int64_t count = 0;  // "count": elements per call (per rank for AG / RS / all-to-all)
};
TestSize test_size(CollectiveKind kind, Bytes requested, DataType t, int n_ranks);

const char* test_binary(CollectiveKind kind);  // "all_reduce_perf", ...
bool test_has_op(CollectiveKind kind);         // prints the op (reductions and sendrecv)
bool test_has_root(CollectiveKind kind);       // prints the root and iterates -r -1

// Whether NCCL lets this call use NVLS / NVLS tree (ncclNvlsSupported and, from 2.22, every
// all-gather). When false NCCL picks among the other algorithms, as with NCCL_NVLS_ENABLE=0.
bool nvls_supports(const Constants& k, CollectiveKind kind, RedOp op, DataType t);

}  // namespace zerosim::nccl
