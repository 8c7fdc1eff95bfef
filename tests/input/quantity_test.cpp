#include "sim/input/quantity.h"

#include <gtest/gtest.h>

#include "sim/core/error.h"

namespace zerosim {
namespace {

TEST(Quantity, ParsesUnits) {
  // 400 Gb/s = 400e9 / 8 bytes/s; 80 GiB = 80 * 2^30 bytes; 1.5 us = 1.5e-6 s.
  EXPECT_DOUBLE_EQ(parse_quantity_text("400Gbps", Dimension::Bandwidth, "k"), 50e9);
  EXPECT_DOUBLE_EQ(parse_quantity_text("600GB/s", Dimension::Bandwidth, "k"), 600e9);
  EXPECT_DOUBLE_EQ(parse_quantity_text("80GiB", Dimension::Bytes, "k"), 80.0 * 1073741824.0);
  EXPECT_DOUBLE_EQ(parse_quantity_text("1.5us", Dimension::Time, "k"), 1.5e-6);
  EXPECT_DOUBLE_EQ(parse_quantity(nlohmann::json(42), Dimension::Bytes, "k"), 42.0);
}

TEST(Quantity, RejectsWrongUnitWithKeyPath) {
  try {
    parse_quantity_text("400GiB", Dimension::Bandwidth, "cluster.nic_bandwidth");
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "cluster.nic_bandwidth");
    EXPECT_NE(std::string(e.what()).find("Gbps"), std::string::npos);
  }
  EXPECT_THROW(parse_quantity_text("fast", Dimension::Bandwidth, "k"), InputError);
  EXPECT_THROW(parse_quantity_text("nan", Dimension::Time, "k"), InputError);
  EXPECT_THROW(parse_quantity(nlohmann::json::array(), Dimension::Time, "k"), InputError);
}

TEST(DidYouMean, SuggestsClosest) {
  EXPECT_EQ(did_you_mean("micro_batch_sise", {"micro_batch_size", "global_batch_size"}),
            " (did you mean 'micro_batch_size'?)");
  EXPECT_EQ(did_you_mean("zzzzzzzz", {"tp", "pp"}), "");
}

}  // namespace
}  // namespace zerosim
