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
  EXPECT_DOUBLE_EQ(parse_quantity(nlohmann::json("42B"), Dimension::Bytes, "k"), 42.0);
  // Counts are bare; zero needs no unit.
  EXPECT_DOUBLE_EQ(parse_quantity(nlohmann::json(42), Dimension::Count, "k"), 42.0);
  EXPECT_DOUBLE_EQ(parse_quantity(nlohmann::json(0), Dimension::Bandwidth, "k"), 0.0);
}

// A size, bandwidth or time without its unit is refused, naming the key and the accepted forms:
// `--set cluster.nic_bandwidth=400` once meant 400 B/s.
TEST(Quantity, RequiresAUnit) {
  for (const nlohmann::json& v : {nlohmann::json(400), nlohmann::json("400")}) {
    try {
      (void)parse_quantity(v, Dimension::Bandwidth, "cluster.nic_bandwidth");
      FAIL() << "accepted " << v.dump();
    } catch (const InputError& e) {
      EXPECT_EQ(e.key_path(), "cluster.nic_bandwidth");
      EXPECT_NE(std::string(e.what()).find("400Gbps"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("Gbps"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW((void)parse_quantity(nlohmann::json(1.5), Dimension::Time, "k"), InputError);
  EXPECT_THROW((void)parse_quantity(nlohmann::json(80), Dimension::Bytes, "k"), InputError);
}

TEST(Quantity, TextReadsBackExactly) {
  for (double v : {50e9, 2.7e-6, 1.0 / 3.0, 85899345920.0, 6e-7}) {
    for (Dimension d : {Dimension::Bytes, Dimension::Bandwidth, Dimension::Time}) {
      EXPECT_EQ(parse_quantity_text(quantity_text(v, d), d, "k"), v) << quantity_text(v, d);
    }
  }
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
