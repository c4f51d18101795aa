// The decision path allocates nothing once instances have joined. This test
// has its own executable: it replaces the global operator new to count.
#include <gtest/gtest.h>

// GCC cannot see that the replaced new and delete below pair malloc and free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <atomic>
#include <cstdlib>
#include <new>

#include "core/faa/slice_scheduler.h"

namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

}  // namespace

void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  if (void* memory = std::malloc(size == 0 ? 1 : size)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept {
  std::free(memory);
}
void operator delete(void* memory, std::size_t) noexcept {
  std::free(memory);
}

namespace egpu::faa {
namespace {

TEST(NoAllocation, DecisionsChargesAndStatsAfterJoin) {
  Result<SliceScheduler> created = SliceScheduler::create(Config{}, 0);
  ASSERT_TRUE(created.ok());
  SliceScheduler& scheduler = created.value();
  for (InstanceId id = 1; id <= 16; ++id) {
    ASSERT_TRUE(
        scheduler.join(id, 1.0 / 16.0 - 1e-9, id % 4 == 0 ? Mode::kCap : Mode::kBurst, 0).ok());
    ASSERT_TRUE(scheduler.set_asking(id, true, 0).ok());
  }
  counting = true;
  Nanos now = 0;
  Grant grant = scheduler.decide(now);
  std::uint64_t grants = 0;
  for (int step = 0; step < 20000; ++step) {
    now += kMillisecond;
    if (grant.holder) {
      if (!scheduler.charge(*grant.holder, kMillisecond, now).ok()) break;
      // Now and then the holder yields and asks again.
      if (step % 7 == 0 && !scheduler.set_asking(*grant.holder, false, now).ok()) break;
      if (step % 7 == 0 && !scheduler.set_asking(*grant.holder, true, now).ok()) break;
    }
    const Grant next = scheduler.decide(now);
    if (next.sequence != grant.sequence) ++grants;
    grant = next;
    if (step % 100 == 0 &&
        (!scheduler.stats(3, now).ok() || scheduler.gpu_stats(now).instances != 16)) {
      break;
    }
  }
  counting = false;
  EXPECT_EQ(allocations.load(), 0);
  EXPECT_GT(grants, 1000U);  // it really decided
}

}  // namespace
}  // namespace egpu::faa
