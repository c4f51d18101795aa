// StreamLock: mutual exclusion, and a waiter that outlasts its spins (the
// holder blocked in the driver) still gets the lock once it is given back.
#include "core/pacing/stream_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace egpu::pacing {
namespace {

TEST(StreamLock, ExcludesAndLosesNoUpdateAmongContendingThreads) {
  StreamLock lock;
  uint64_t counter = 0;  // plain: only the lock protects it
  constexpr int kThreads = 4;
  constexpr int kRounds = 50'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::lock_guard guard(lock);
        counter = counter + 1;
      }
    });
  }
  for (std::thread& t : threads)
    t.join();
  EXPECT_EQ(counter, uint64_t{kThreads} * kRounds);
}

TEST(StreamLock, TryLockFailsWhileHeldAndSucceedsAfter) {
  StreamLock lock;
  ASSERT_TRUE(lock.try_lock());
  EXPECT_FALSE(lock.try_lock());
  lock.unlock();
  EXPECT_TRUE(lock.try_lock());
  lock.unlock();
}

TEST(StreamLock, AWaiterPastItsSpinsGetsTheLockWhenTheHolderLetsGo) {
  StreamLock lock;
  lock.lock();
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    std::lock_guard guard(lock);
    got.store(true);
  });
  // The waiter spins, yields, then sleeps in steps; it must not take the
  // lock while it is held, however long that is.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  lock.unlock();
  waiter.join();
  EXPECT_TRUE(got.load());
}

}  // namespace
}  // namespace egpu::pacing
