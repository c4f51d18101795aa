// StreamLock: mutual exclusion, and a waiter that outlasts its spins (the
// holder blocked in the driver) still gets the lock once it is given back,
// even when its thread is cancelled while it waits.
#include "core/pacing/stream_lock.h"

#include <gtest/gtest.h>
#include <pthread.h>

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

struct CancelledWaiter {
  StreamLock* lock;
  std::atomic<bool> waiting{false};
  std::atomic<bool> got{false};
};

// Takes the lock as the shim does (noexcept, inside a catch-all), then meets
// the program's own cancellation point.
void* wait_for_the_lock(void* arg) {
  auto* w = static_cast<CancelledWaiter*>(arg);
  try {
    w->waiting.store(true);
    std::lock_guard guard(*w->lock);
    w->got.store(true);
  } catch (...) {
    // The forced unwind of a cancellation must never get here.
  }
  pthread_testcancel();
  return nullptr;
}

// A thread cancelled while it sleeps for the lock: acted on in that sleep,
// the cancellation unwound through noexcept code and aborted the process.
// It is acted on at the thread's next cancellation point instead.
TEST(StreamLock, AWaiterCancelledWhileItSleepsGetsTheLockThenEndsAtItsCancellationPoint) {
  StreamLock lock;
  lock.lock();
  CancelledWaiter w{&lock};
  pthread_t waiter;
  ASSERT_EQ(pthread_create(&waiter, nullptr, &wait_for_the_lock, &w), 0);
  while (!w.waiting.load())
    std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past its spins: asleep
  ASSERT_EQ(pthread_cancel(waiter), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(w.got.load());
  lock.unlock();
  void* result = nullptr;
  ASSERT_EQ(pthread_join(waiter, &result), 0);
  EXPECT_EQ(result, PTHREAD_CANCELED);
  EXPECT_TRUE(w.got.load());
  EXPECT_TRUE(lock.try_lock());  // given back on the way out
  lock.unlock();
}

}  // namespace
}  // namespace egpu::pacing
