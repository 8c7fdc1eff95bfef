// What an nccl-tests run feeds NCCL: element sizes, the size and count columns of each test, and
// the (op, type) pairs NCCL runs with NVLS.
#include <gtest/gtest.h>

#include "sim/collective/nccl_tests.h"

namespace zerosim::nccl {
namespace {

TEST(ncclTests, TypeSizesAndNames) {
  EXPECT_EQ(type_size(DataType::Int8), 1);
  EXPECT_EQ(type_size(DataType::F8e5m2), 1);
  EXPECT_EQ(type_size(DataType::Bfloat16), 2);
  EXPECT_EQ(type_size(DataType::Uint32), 4);
  EXPECT_EQ(type_size(DataType::Double), 8);
  EXPECT_EQ(value_of(kDataTypeNames, "half"), DataType::Half);
  EXPECT_EQ(value_of(kRedOpNames, "mulsum"), RedOp::MulSum);
  // fp8 from NCCL 2.24; the rest in nccl-tests' order (test_typenames).
  EXPECT_EQ(all_types(constants(Version::V2_21)).size(), 10u);
  const auto t27 = all_types(constants(Version::V2_27));
  ASSERT_EQ(t27.size(), 12u);
  EXPECT_EQ(t27.front(), DataType::Int8);
  EXPECT_EQ(t27.back(), DataType::F8e5m2);
  EXPECT_EQ(all_ops().size(), 6u);
}

// setupArgs + GetCollByteCount: count = size / element; per-rank shares 16-byte aligned.
TEST(ncclTests, SizeAndCountPerCollective) {
  TestSize s = test_size(CollectiveKind::AllReduce, 1001, DataType::Float, 8);
  EXPECT_EQ(s.bytes, 1000);
  EXPECT_EQ(s.count, 250);
  s = test_size(CollectiveKind::Broadcast, 7, DataType::Double, 8);
  EXPECT_EQ(s.bytes, 0);
  // 250 floats over 8 ranks: 31 each, 28 once 16-byte aligned; the size is the gathered buffer.
  for (CollectiveKind k :
       {CollectiveKind::AllGather, CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
    s = test_size(k, 1000, DataType::Float, 8);
    EXPECT_EQ(s.count, 28);
    EXPECT_EQ(s.bytes, 28 * 8 * 4);
  }
  EXPECT_EQ(test_size(CollectiveKind::AllGather, 1000, DataType::Double, 8).count, 14);  // 15 -> 14
  EXPECT_EQ(test_size(CollectiveKind::AllGather, 1000, DataType::Int8, 8).count, 112);  // 125 -> 112
  // Powers of two large enough are left alone: zerosim's sizes stay nccl-tests' sizes.
  s = test_size(CollectiveKind::AllGather, 1 << 20, DataType::Bfloat16, 16);
  EXPECT_EQ(s.bytes, 1 << 20);
  EXPECT_EQ(s.count, (1 << 20) / 2 / 16);
}

TEST(ncclTests, BinariesAndColumns) {
  EXPECT_STREQ(test_binary(CollectiveKind::AllToAll), "alltoall_perf");
  EXPECT_STREQ(test_binary(CollectiveKind::SendRecv), "sendrecv_perf");
  EXPECT_TRUE(test_has_op(CollectiveKind::SendRecv));
  EXPECT_FALSE(test_has_op(CollectiveKind::AllGather));
  EXPECT_TRUE(test_has_root(CollectiveKind::Reduce));
  EXPECT_FALSE(test_has_root(CollectiveKind::AllReduce));
}

// ncclNvlsSupported: sum and min/max on 32/64-bit integers, half and bfloat16; sum only on float
// and double; nothing for 8-bit types, prod, avg or mulsum. All-gather: any type from 2.22.
TEST(ncclTests, NvlsKernelsByOpAndType) {
  const Constants& k21 = constants(Version::V2_21);
  const Constants& k27 = constants(Version::V2_27);
  const auto ar = CollectiveKind::AllReduce;
  EXPECT_TRUE(nvls_supports(k27, ar, RedOp::Sum, DataType::Float));
  EXPECT_TRUE(nvls_supports(k27, ar, RedOp::Max, DataType::Bfloat16));
  EXPECT_TRUE(nvls_supports(k27, ar, RedOp::Min, DataType::Int64));
  EXPECT_FALSE(nvls_supports(k27, ar, RedOp::Max, DataType::Float));
  EXPECT_FALSE(nvls_supports(k27, ar, RedOp::Prod, DataType::Half));
  EXPECT_FALSE(nvls_supports(k27, ar, RedOp::Avg, DataType::Float));
  EXPECT_FALSE(nvls_supports(k27, ar, RedOp::MulSum, DataType::Bfloat16));
  EXPECT_FALSE(nvls_supports(k27, ar, RedOp::Sum, DataType::Uint8));
  EXPECT_FALSE(nvls_supports(k27, CollectiveKind::ReduceScatter, RedOp::Sum, DataType::F8e4m3));
  EXPECT_FALSE(nvls_supports(k21, CollectiveKind::AllGather, RedOp::Sum, DataType::Int8));
  EXPECT_TRUE(nvls_supports(k27, CollectiveKind::AllGather, RedOp::Prod, DataType::Int8));
  EXPECT_TRUE(nvls_supports(k21, CollectiveKind::AllGather, RedOp::Prod, DataType::Float));
  EXPECT_TRUE(nvls_supports(k21, CollectiveKind::Broadcast, RedOp::Prod, DataType::Int8));
}

}  // namespace
}  // namespace zerosim::nccl
