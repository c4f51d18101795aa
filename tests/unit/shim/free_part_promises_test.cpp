#include "shim/free_part_promises.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace egpu::shim {
namespace {

// Two launches in flight never both count on the same free part of a pool.
TEST(FreePartPromises, FreePoolIsPromisedOnce) {
  FreePartPromises t;
  EXPECT_FALSE(t.in_flight(0));
  EXPECT_EQ(t.promise(0, 100, 70), 70u);
  EXPECT_EQ(t.promise(0, 100, 70), 30u);  // what the first left
  EXPECT_EQ(t.promise(0, 100, 70), 0u);
  EXPECT_EQ(t.promise(1, 100, 70), 70u);  // another device's pool
  t.unpromise(0, 70);
  EXPECT_EQ(t.promise(0, 100, 200), 70u);  // three in flight on pool 0 now
  t.unpromise(0, 0);
  t.unpromise(0, 30);
  t.unpromise(0, 70);
  EXPECT_FALSE(t.in_flight(0));
  EXPECT_TRUE(t.in_flight(1));
  EXPECT_EQ(t.promise(0, 40, 200), 40u);  // the pool shrank meanwhile
  t.unpromise(0, 1000);                   // never below nothing
  EXPECT_FALSE(t.in_flight(0));
  EXPECT_EQ(t.promise(0, 100, 200), 100u);
}

TEST(FreePartPromises, ConcurrentPromisesNeverExceedTheFreePart) {
  FreePartPromises t;
  std::atomic<uint64_t> granted{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 1000; ++k)
        granted += t.promise(0, 5000, 7);
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_EQ(granted.load(), 5000u);
}

}  // namespace
}  // namespace egpu::shim
