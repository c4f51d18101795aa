#include "core/model/node_weight.h"

#include <gtest/gtest.h>

namespace {

// Slurm's order of two weights: it compares `weight << 8` computed in 32 bits
// (node_scheduler.c, _set_sched_weight), i.e. the weights modulo 2^24.
bool slurm_tries_first(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>(a << 8) < static_cast<uint32_t>(b << 8);
}

TEST(NodeWeight, FewerFreeUnitsWeighLessWithinOneTier) {
  const uint32_t full = egpu_packed_node_weight(0, 0);
  const uint32_t half = egpu_packed_node_weight(0, 400);
  const uint32_t empty = egpu_packed_node_weight(0, 800);
  EXPECT_TRUE(slurm_tries_first(full, half));
  EXPECT_TRUE(slurm_tries_first(half, empty));
  EXPECT_EQ(empty - half, 400u);  // one step per unit: shares of any size order
  EXPECT_EQ(full, 1u);            // Slurm's own smallest useful weight
}

TEST(NodeWeight, TiersKeepTheirOrderAsSlurmComparesThem) {
  // The emptiest node (64 GPUs) of a tier before the fullest of the next,
  // up to the last tier, as Slurm compares them (modulo 2^24).
  for (uint32_t tier = 0; tier + 1 < EGPU_NODE_WEIGHT_TIERS; ++tier) {
    ASSERT_TRUE(slurm_tries_first(egpu_packed_node_weight(tier, 6400),
                                  egpu_packed_node_weight(tier + 1, 0)))
        << "tier " << tier;
  }
  EXPECT_LT(egpu_packed_node_weight(EGPU_NODE_WEIGHT_TIERS - 1, 6400), EGPU_NODE_WEIGHT_LIMIT);
}

TEST(NodeWeight, OutOfRangeInputsAreClampedNotWrapped) {
  // More free units than a band holds read as a full band, not a tier up.
  EXPECT_EQ(egpu_packed_node_weight(3, 1000000), egpu_packed_node_weight(3, 6400));
  EXPECT_TRUE(
      slurm_tries_first(egpu_packed_node_weight(3, 1000000), egpu_packed_node_weight(4, 0)));
  // A tier past the last (the caller does not pack then) stays below 2^24.
  EXPECT_EQ(egpu_packed_node_weight(100000, 5),
            egpu_packed_node_weight(EGPU_NODE_WEIGHT_TIERS - 1, 5));
  EXPECT_LT(egpu_packed_node_weight(100000, 6400), EGPU_NODE_WEIGHT_LIMIT);
}

}  // namespace
