#include "core/quota/memory_quota.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <random>
#include <thread>
#include <vector>

namespace egpu::quota {
namespace {

constexpr uint64_t kMiB = 1 << 20;

// reserve() against a fixed limit.
Reservation reserve_within(shm::InstancePage* page, uint32_t proc, uint64_t bytes, uint64_t limit,
                           int64_t lock_timeout_ns = 2'000'000'000) {
  const std::atomic<uint64_t> word{limit};
  return reserve(page, proc, bytes, word, lock_timeout_ns);
}

// An instance page in anonymous shared memory, visible to forked children.
class SharedPage {
 public:
  SharedPage() {
    mem_ = mmap(nullptr, sizeof(shm::InstancePage), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(mem_, MAP_FAILED);
    page_ = new (mem_) shm::InstancePage();
    EXPECT_TRUE(init_instance_lock(page_));
  }
  ~SharedPage() { munmap(mem_, sizeof(shm::InstancePage)); }
  shm::InstancePage* get() { return page_; }

 private:
  void* mem_;
  shm::InstancePage* page_;
};

TEST(MemoryQuota, GrantsWithinQuotaAndRefusesBeyond) {
  SharedPage page;
  page.get()->procs[0].pid = 100;
  page.get()->procs[1].pid = 101;
  EXPECT_EQ(reserve_within(page.get(), 0, 60 * kMiB, 100 * kMiB), Reservation::kGranted);
  EXPECT_EQ(reserve_within(page.get(), 1, 40 * kMiB, 100 * kMiB), Reservation::kGranted);
  EXPECT_EQ(reserve_within(page.get(), 1, 1, 100 * kMiB), Reservation::kOverQuota);
  EXPECT_EQ(used(page.get()), 100 * kMiB);
  release(page.get(), 0, 10 * kMiB);
  EXPECT_EQ(used(page.get()), 90 * kMiB);
  EXPECT_EQ(reserve_within(page.get(), 1, 10 * kMiB, 100 * kMiB), Reservation::kGranted);
  EXPECT_EQ(reserve_within(page.get(), 0, UINT64_MAX, 100 * kMiB), Reservation::kOverQuota);
  release(page.get(), 0, 1000 * kMiB);  // saturates, never wraps
  EXPECT_EQ(page.get()->procs[0].mem_bytes.load(), 0u);
}

TEST(MemoryQuota, ReclaimingADeadProcessIsOneStore) {
  SharedPage page;
  page.get()->procs[3].pid = 300;
  ASSERT_EQ(reserve_within(page.get(), 3, 80 * kMiB, 100 * kMiB), Reservation::kGranted);
  page.get()->procs[4].pid = 400;
  EXPECT_EQ(reserve_within(page.get(), 4, 30 * kMiB, 100 * kMiB), Reservation::kOverQuota);
  page.get()->procs[3].pid = 0;  // the agent saw process 300 die
  EXPECT_EQ(used(page.get()), 0u);
  EXPECT_EQ(reserve_within(page.get(), 4, 30 * kMiB, 100 * kMiB), Reservation::kGranted);
}

TEST(MemoryQuota, ConcurrentThreadsNeverExceedQuota) {
  SharedPage page;
  constexpr uint64_t kQuota = 64 * kMiB;
  constexpr int kThreads = 8;
  std::atomic<bool> exceeded{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    page.get()->procs[t].pid = 1000 + t;
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<uint64_t> held;
      for (int i = 0; i < 3000; ++i) {
        if (!held.empty() && rng() % 3 == 0) {
          release(page.get(), t, held.back());
          held.pop_back();
        } else {
          uint64_t size = (1 + rng() % 8) * kMiB;
          if (reserve_within(page.get(), t, size, kQuota) == Reservation::kGranted)
            held.push_back(size);
        }
        // Read under the lock: no reservation then runs, and a release
        // only lowers the sum. Read without it, one thread's release (of a
        // slot already summed) and another's reservation (in a slot not
        // yet summed) made a sum over quota that was never the total.
        pthread_mutex_lock(&page.get()->alloc_lock);
        if (used(page.get()) > kQuota) exceeded = true;
        pthread_mutex_unlock(&page.get()->alloc_lock);
      }
      for (auto s : held)
        release(page.get(), t, s);
    });
  }
  for (auto& th : threads)
    th.join();
  EXPECT_FALSE(exceeded.load());
  EXPECT_EQ(used(page.get()), 0u);
}

TEST(MemoryQuota, ConcurrentProcessesTogetherGetExactlyTheQuota) {
  SharedPage page;
  constexpr uint64_t kQuota = 500 * kMiB;
  constexpr int kProcs = 4;
  std::vector<pid_t> kids;
  for (int p = 0; p < kProcs; ++p) {
    page.get()->procs[p].pid = 2000 + p;
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      while (reserve_within(page.get(), p, kMiB, kQuota) == Reservation::kGranted) {
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int status = 0;
    waitpid(k, &status, 0);
    EXPECT_TRUE(WIFEXITED(status));
  }
  EXPECT_EQ(used(page.get()), kQuota);
}

TEST(MemoryQuota, ProcessKilledHoldingTheLockDoesNotBlockOthers) {
  SharedPage page;
  page.get()->procs[0].pid = 1;
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pthread_mutex_lock(&page.get()->alloc_lock);
    raise(SIGKILL);
    _exit(1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(reserve_within(page.get(), 0, kMiB, 10 * kMiB), Reservation::kGranted);
  EXPECT_EQ(reserve_within(page.get(), 0, kMiB, 10 * kMiB), Reservation::kGranted);
  EXPECT_EQ(used(page.get()), 2 * kMiB);
}

TEST(MemoryQuota, StoppedHolderTimesOutInsteadOfHanging) {
  SharedPage page;
  page.get()->procs[0].pid = 1;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pthread_mutex_lock(&page.get()->alloc_lock);
    char c = 1;
    (void)!write(ready[1], &c, 1);
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(reserve_within(page.get(), 0, kMiB, 10 * kMiB, 50'000'000),
            Reservation::kLockUnavailable);
  EXPECT_EQ(used(page.get()), 0u);
  // What the shim does, for a new allocation and for one that grows (a
  // pitched one): accounted without the check, not refused.
  const std::atomic<uint64_t> limit{10 * kMiB};
  EXPECT_EQ(reserve_or_account(page.get(), 0, kMiB, limit, 50'000'000),
            Reservation::kLockUnavailable);
  EXPECT_EQ(used(page.get()), kMiB);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(ready[0]);
  close(ready[1]);
  EXPECT_EQ(reserve_within(page.get(), 0, kMiB, 10 * kMiB), Reservation::kGranted);
  // Over the quota, with the lock free again: refused, nothing accounted.
  EXPECT_EQ(reserve_or_account(page.get(), 0, 9 * kMiB, limit), Reservation::kOverQuota);
  EXPECT_EQ(used(page.get()), 2 * kMiB);
}

TEST(MemoryQuota, LimitIsReadAtEachReservationAndAFailedOneLeavesNothing) {
  SharedPage page;
  page.get()->procs[0].pid = 1;
  std::atomic<uint64_t> limit{100 * kMiB};
  ASSERT_EQ(reserve(page.get(), 0, 60 * kMiB, limit), Reservation::kGranted);
  // The agent lowers the limit (a step of the job started): what is held
  // stays, nothing more is granted, and the refused bytes leave no trace.
  limit.store(60 * kMiB);
  EXPECT_EQ(reserve(page.get(), 0, 1, limit), Reservation::kOverQuota);
  EXPECT_EQ(used(page.get()), 60 * kMiB);
  limit.store(0);
  EXPECT_EQ(reserve(page.get(), 0, 1, limit), Reservation::kOverQuota);
  limit.store(shm::kNoMemLimit);
  EXPECT_EQ(reserve(page.get(), 0, 1 << 30, limit), Reservation::kGranted);
}

TEST(MemoryQuota, AForgedHugeCountNeitherWrapsTheSumNorTheAdd) {
  SharedPage page;
  page.get()->procs[0].pid = 1;
  page.get()->procs[1].pid = 2;
  page.get()->procs[1].mem_bytes = UINT64_MAX - 10;
  const std::atomic<uint64_t> limit{100 * kMiB};
  EXPECT_EQ(reserve(page.get(), 0, 20, limit), Reservation::kOverQuota);
  EXPECT_EQ(used(page.get()), UINT64_MAX - 10);
  EXPECT_EQ(page.get()->procs[0].mem_bytes.load(), 0u);
  page.get()->procs[0].mem_bytes = 20;  // the sum saturates
  EXPECT_EQ(used(page.get()), UINT64_MAX);
}

}  // namespace
}  // namespace egpu::quota
