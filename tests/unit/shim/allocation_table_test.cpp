#include "shim/allocation_table.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace egpu::shim {
namespace {

TEST(AllocationTable, TakeReturnsWhatWasInsertedOnce) {
  AllocationTable t;
  t.insert(AllocationKind::kPointer, 0x1000, {4096, 0});
  auto got = t.take(AllocationKind::kPointer, 0x1000);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->bytes, 4096u);
  EXPECT_FALSE(t.take(AllocationKind::kPointer, 0x1000).has_value());
}

TEST(AllocationTable, KindsAreSeparateKeySpaces) {
  AllocationTable t;
  t.insert(AllocationKind::kPointer, 42, {1, 0});
  t.insert(AllocationKind::kArray, 42, {2, 0});
  t.insert(AllocationKind::kVmmHandle, 42, {3, 0});
  EXPECT_EQ(t.take(AllocationKind::kArray, 42)->bytes, 2u);
  EXPECT_EQ(t.take(AllocationKind::kPointer, 42)->bytes, 1u);
  EXPECT_EQ(t.take(AllocationKind::kVmmHandle, 42)->bytes, 3u);
  EXPECT_FALSE(t.take(AllocationKind::kMipmappedArray, 42).has_value());
}

TEST(AllocationTable, LiveBytesPerDevice) {
  AllocationTable t;
  t.insert(AllocationKind::kPointer, 1, {100, 0});
  t.insert(AllocationKind::kArray, 2, {50, 0});
  t.insert(AllocationKind::kPointer, 3, {7, 1});
  EXPECT_EQ(t.live_bytes(0), 150u);
  EXPECT_EQ(t.live_bytes(1), 7u);
  (void)t.take(AllocationKind::kPointer, 1);
  EXPECT_EQ(t.live_bytes(0), 50u);
}

// The driver frees everything in a context it destroys: those entries go,
// with their bytes, and nothing of another context or of none.
TEST(AllocationTable, TakeContextRemovesExactlyThatContextsEntries) {
  AllocationTable t;
  t.insert(AllocationKind::kPointer, 1, {100, 0, 0xc1});
  t.insert(AllocationKind::kArray, 2, {50, 0, 0xc1});
  t.insert(AllocationKind::kMipmappedArray, 3, {25, 0, 0xc1});
  t.insert(AllocationKind::kPointer, 4, {7, 0, 0xc2});
  t.insert(AllocationKind::kVmmHandle, 5, {3, 0});
  const auto taken = t.take_context(0xc1);
  uint64_t bytes = 0;
  for (const LiveAllocation& a : taken)
    bytes += a.bytes;
  EXPECT_EQ(taken.size(), 3u);
  EXPECT_EQ(bytes, 175u);
  EXPECT_EQ(t.live_bytes(0), 10u);
  EXPECT_TRUE(t.take_context(0).empty());  // 0: no context, never taken
  EXPECT_EQ(t.size(), 2u);
}

// A key the driver hands out again: the old entry's allocation is gone.
TEST(AllocationTable, InsertReturnsTheEntryItReplaces) {
  AllocationTable t;
  EXPECT_FALSE(t.insert(AllocationKind::kPointer, 0x1000, {4096, 0, 0xc1}).has_value());
  const auto replaced = t.insert(AllocationKind::kPointer, 0x1000, {512, 0, 0xc2});
  ASSERT_TRUE(replaced.has_value());
  EXPECT_EQ(replaced->bytes, 4096u);
  EXPECT_EQ(t.live_bytes(0), 512u);
}

TEST(AllocationTable, ConcurrentInsertsAndTakesBalance) {
  AllocationTable t;
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&t, k] {
      for (uint64_t i = 0; i < 5000; ++i) {
        const uint64_t key = (static_cast<uint64_t>(k) << 32) | i;
        t.insert(AllocationKind::kPointer, key, {10, 0});
        if (i % 2 == 0) (void)t.take(AllocationKind::kPointer, key);
      }
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(t.size(), 4u * 2500);
  EXPECT_EQ(t.live_bytes(0), 4u * 2500 * 10);
}

}  // namespace
}  // namespace egpu::shim
