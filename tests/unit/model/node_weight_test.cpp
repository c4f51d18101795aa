#include "core/model/node_weight.h"

#include <gtest/gtest.h>

namespace {

TEST(NodeWeight, FewerFreeUnitsWeighLessWithinOneConfiguredWeight) {
  const uint32_t full = egpu_packed_node_weight(1, 0);
  const uint32_t half = egpu_packed_node_weight(1, 400);
  const uint32_t empty = egpu_packed_node_weight(1, 800);
  EXPECT_LT(full, half);
  EXPECT_LT(half, empty);
  EXPECT_EQ(empty - half, 400u);  // one step per unit: shares of any size order
  EXPECT_EQ(full, EGPU_NODE_WEIGHT_BAND + 1);
}

TEST(NodeWeight, TheConfiguredWeightStaysTheLeadingKey) {
  // The emptiest node of tier 1 still comes before the fullest of tier 2,
  // and the largest node egpu.conf allows (64 GPUs) is within the band.
  EXPECT_LT(egpu_packed_node_weight(1, 6400), egpu_packed_node_weight(2, 0));
  EXPECT_LT(egpu_packed_node_weight(0, 6400), egpu_packed_node_weight(1, 0));
  // More free units than a band holds read as a full band, not a tier up.
  EXPECT_EQ(egpu_packed_node_weight(3, 1000000), egpu_packed_node_weight(3, 6400));
  EXPECT_LT(egpu_packed_node_weight(3, 1000000), egpu_packed_node_weight(4, 0));
}

TEST(NodeWeight, WeightsTooLargeToPackAreLeftAsConfigured) {
  const uint32_t top = EGPU_NODE_WEIGHT_PACKABLE;
  EXPECT_LE(egpu_packed_node_weight(top, 6400), EGPU_NODE_WEIGHT_MAX);
  EXPECT_GT(egpu_packed_node_weight(top, 0), egpu_packed_node_weight(top - 1, 6400));
  EXPECT_EQ(egpu_packed_node_weight(top + 1, 0), top + 1);
  EXPECT_EQ(egpu_packed_node_weight(0xffffffffu, 5), 0xffffffffu);  // INFINITE stays so
}

}  // namespace
