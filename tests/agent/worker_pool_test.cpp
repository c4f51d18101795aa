// WorkerPool: a task that blocks does not hold up the next one (another
// worker starts) until the cap; past it tasks wait for a worker to come back.
#include "nodeagent/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace egpu::agent {
namespace {

using namespace std::chrono_literals;

// Waits (up to a minute: the deadline only ends a failing case) for `done`.
bool eventually(const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(WorkerPool, BlockedTasksTakeAWorkerEachUpToTheCap) {
  // Never destroyed (its workers are detached and outlive the test).
  static auto* pool = new WorkerPool(2);
  ASSERT_TRUE(pool->start());
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> ran{0};
  // Two tasks that block: each holds one of the two workers.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool->run([released, &ran] {
      ++ran;
      released.wait();
    }));
  }
  ASSERT_TRUE(eventually([&] { return ran.load() == 2; })) << "the second did not get a worker";
  // A third waits: the cap is reached.
  ASSERT_TRUE(pool->run([&ran] { ++ran; }));
  EXPECT_EQ(pool->pending(), 3u);
  EXPECT_EQ(ran.load(), 2);
  release.set_value();
  EXPECT_TRUE(eventually([&] { return ran.load() == 3 && pool->pending() == 0; }));
}

}  // namespace
}  // namespace egpu::agent
