#include "shim/mem_pool_table.h"

#include <gtest/gtest.h>

namespace egpu::shim {
namespace {

const int kPoolA = 1;
const int kPoolB = 2;
const int kHostPool = 3;

TEST(MemPoolTable, APoolKeepsTheDeviceItWasFirstNotedOn) {
  MemPoolTable t;
  EXPECT_TRUE(t.empty());
  EXPECT_FALSE(t.device_of(&kPoolA).has_value());
  t.note(&kPoolA, 1);
  t.note(&kPoolA, 0);  // a caller on another device allocates from it
  EXPECT_EQ(t.device_of(&kPoolA), 1);
  t.note(&kPoolB, 0);
  t.note(&kHostPool, MemPoolTable::kHost);
  EXPECT_FALSE(t.empty());
  // Host pools are known (so they pass through) but never settled.
  const auto pools = t.pools();
  ASSERT_EQ(pools.size(), 2u);
  EXPECT_EQ(t.device_of(&kHostPool), MemPoolTable::kHost);
  t.forget(&kPoolA);
  EXPECT_FALSE(t.device_of(&kPoolA).has_value());
  ASSERT_EQ(t.pools().size(), 1u);
  EXPECT_EQ(t.pools()[0].first, &kPoolB);
}

}  // namespace
}  // namespace egpu::shim
