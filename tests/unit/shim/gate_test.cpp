// The gate's slow path on pages held in this process: it returns when the slot
// is granted, when the agent restarts, and when its heartbeat goes stale - never
// later than the heartbeat timeout - and counts the wait as asking.
#include "shim/gate.h"

#include <gtest/gtest.h>
#include <linux/futex.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "core/shm/grant_futex.h"
#include "core/util/clock.h"
#include "tests/support/thread_state.h"

namespace egpu::shim {
namespace {

constexpr uint32_t kSlot = 3;

using test::thread_asleep;
constexpr int64_t kMs = 1'000'000;

// The agent's heartbeat timeout where a test is not about it: long enough
// that no delay of a loaded machine makes the agent look dead.
constexpr int64_t kLongTimeout = 60'000 * kMs;

struct Pages {
  explicit Pages(int64_t heartbeat_timeout = kLongTimeout)
      : gpu(std::make_unique<shm::GpuPage>()), instance(std::make_unique<shm::InstancePage>()) {
    gpu->agent_epoch.store(7);
    gpu->heartbeat_timeout_ns.store(heartbeat_timeout);
    gpu->heartbeat_ns.store(monotonic_ns());
    gpu->holder.store(shm::kNoHolder);
    a.gpu = gpu.get();
    a.instance = instance.get();
    a.me = shm::ProcSlotWriter(&instance->procs[0]);
    a.gpu_slot = kSlot;
    a.epoch = 7;
    int ends[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, ends) == 0) {
      agent_end = UniqueFd(ends[0]);
      a.wake = UniqueFd(ends[1]);
    }
  }
  // As the agent grants: the holder, then the granted instance's grant word.
  void grant(uint32_t slot) {
    gpu->holder.store(slot);
    gpu->grant_seq.fetch_add(1);
    if (slot == kSlot) shm::wake_granted(&instance->grant_word);
  }
  // How many kicks the agent's end of the wake channel holds.
  uint64_t asked() {
    uint64_t v = 0;
    uint64_t n = 0;
    while (recv(agent_end.get(), &v, sizeof v, MSG_DONTWAIT) >= 0)
      ++n;
    return n;
  }
  std::unique_ptr<shm::GpuPage> gpu;
  std::unique_ptr<shm::InstancePage> instance;
  Attachment a;
  UniqueFd agent_end;
};

// As the agent's side of a test: until the process waits at the gate (its
// slot says busy), so that what follows happens while it waits, however late
// the host runs it. False after a minute: it never came to wait.
bool waits_at_gate(const Pages& p) {
  for (int i = 0; i < 60'000; ++i) {
    if (p.instance->procs[0].busy.load() == 1) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

TEST(Gate, HolderPassesAtOnceWithoutAsking) {
  Pages p;
  p.gpu->holder.store(kSlot);
  EXPECT_EQ(wait_for_slice(p.a), SliceWait::kGranted);
  EXPECT_EQ(p.asked(), 0u);
  EXPECT_EQ(p.instance->procs[0].busy.load(), 0u);
}

TEST(Gate, WaitsForTheGrantAsksOnceAndCountsTheWait) {
  Pages p;
  bool busy_seen = false;
  const int64_t start = monotonic_ns();
  std::thread agent([&] {
    busy_seen = waits_at_gate(p);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    p.gpu->heartbeat_ns.store(monotonic_ns());
    p.grant(kSlot);
  });
  EXPECT_EQ(wait_for_slice(p.a), SliceWait::kGranted);
  const int64_t waited = monotonic_ns() - start;
  agent.join();
  EXPECT_TRUE(busy_seen);
  EXPECT_EQ(p.instance->procs[0].busy.load(), 0u);
  EXPECT_EQ(p.asked(), 1u);
  EXPECT_GE(waited, 25 * kMs);
  EXPECT_GE(static_cast<int64_t>(p.instance->procs[0].throttled_ns.load()), 25 * kMs);
}

TEST(Gate, AGrantToAnotherSlotKeepsWaiting) {
  Pages p;
  const int64_t start = monotonic_ns();
  std::thread agent([&] {
    EXPECT_TRUE(waits_at_gate(p));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p.grant(kSlot + 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(40));
    p.gpu->heartbeat_ns.store(monotonic_ns());
    p.grant(kSlot);
  });
  EXPECT_EQ(wait_for_slice(p.a), SliceWait::kGranted);
  agent.join();
  EXPECT_GE(monotonic_ns() - start, 60 * kMs);
}

// A process that held the slice and waited at the in-flight bound comes to
// the gate without asking (kick false): the agent's decision was about it.
// Where that decision gave the slice to nobody, it may have found the
// process idle (between its two waits) and planned no look: the process
// waited for ever (a cap instance alone, under load). It asks there.
TEST(Gate, TurnedAwayWhereNobodyHoldsTheSliceItAsksAnyway) {
  for (const uint32_t holder : {shm::kNoHolder, kSlot + 1}) {
    SCOPED_TRACE(holder == shm::kNoHolder ? "nobody holds it" : "another instance holds it");
    Pages p;
    p.gpu->holder.store(holder);
    std::thread agent([&] {
      EXPECT_TRUE(waits_at_gate(p));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      p.gpu->heartbeat_ns.store(monotonic_ns());
      p.grant(kSlot);
    });
    EXPECT_EQ(wait_for_slice(p.a, {}, /*kick=*/false), SliceWait::kGranted);
    agent.join();
    EXPECT_EQ(p.asked(), holder == shm::kNoHolder ? 1u : 0u);
  }
}

// While the GPU drains this process's own tail for a waiting successor, the
// agent already counts it as asking and its tail falling short will kick
// (note_tail): entering the gate asks nothing more. With nothing queued it
// asks at once, as any waiter does.
TEST(Gate, DrainingItsOwnTailItDoesNotAskAgain) {
  for (const int64_t queued : {int64_t{1} * kMs, int64_t{0}}) {
    SCOPED_TRACE(queued > 0 ? "its own tail drains" : "nothing queued");
    Pages p;
    p.gpu->handover_tail_ns.store(kMs / 5);
    p.gpu->waiters.store(1);  // holder kNoHolder: the GPU drains for a successor
    std::thread agent([&] {
      EXPECT_TRUE(waits_at_gate(p));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      p.gpu->heartbeat_ns.store(monotonic_ns());
      p.grant(kSlot);
    });
    EXPECT_EQ(wait_for_slice(p.a, [queued] { return queued; }), SliceWait::kGranted);
    agent.join();
    EXPECT_EQ(p.asked(), queued > 0 ? 0u : 1u);
  }
}

// note_tail: the draining process tells the agent the moment its tail falls
// to the page's handover tail, once, and only while the GPU drains.
TEST(Gate, ATailFallingShortDuringADrainKicksOnce) {
  Pages p;
  p.gpu->handover_tail_ns.store(kMs / 5);
  note_tail(p.a, kMs, kMs / 2);  // still long
  EXPECT_EQ(p.asked(), 0u);
  note_tail(p.a, kMs / 2, kMs / 10);  // fell short: the handover can go on
  EXPECT_EQ(p.asked(), 1u);
  note_tail(p.a, kMs / 10, 0);  // already short: said before
  EXPECT_EQ(p.asked(), 0u);
  p.gpu->holder.store(kSlot + 1);  // no drain: a new holder runs
  note_tail(p.a, kMs, 0);
  EXPECT_EQ(p.asked(), 0u);
  p.gpu->holder.store(shm::kNoHolder);
  p.gpu->handover_tail_ns.store(0);  // a page of an agent that does not want it
  note_tail(p.a, kMs, 0);
  EXPECT_EQ(p.asked(), 0u);
}

// note_idle: a sync returned with nothing queued while someone waits; the
// agent hears of it if this process holds the slice or the GPU drains.
TEST(Gate, IdleAfterASyncKicksOnlyWhereItHelpsAWaiter) {
  Pages p;
  note_idle(p.a);  // nobody waits
  EXPECT_EQ(p.asked(), 0u);
  p.gpu->waiters.store(1);
  note_idle(p.a);  // the GPU drains (no holder): its tail is gone
  EXPECT_EQ(p.asked(), 1u);
  p.gpu->holder.store(kSlot);
  note_idle(p.a);  // it holds the slice and went idle
  EXPECT_EQ(p.asked(), 1u);
  p.gpu->holder.store(kSlot + 1);
  note_idle(p.a);  // another instance holds it: nothing to say
  EXPECT_EQ(p.asked(), 0u);
  EXPECT_GT(p.instance->procs[0].idle_since_ns.load(), 0);
}

// Any job on the node can map the GPU page read-only and FUTEX_WAKE on it.
// A waiter sleeps on its own instance's grant word, which only its owner can
// map: 20,000 hostile wakes cost it nothing (before, each was a wake-up).
TEST(Gate, WakesOnTheSharedGpuPageDoNotWakeAWaiter) {
  Pages p;
  std::atomic<long> switches{-1};
  std::atomic<int64_t> waited_ns{0};
  std::atomic<pid_t> tid{0};
  std::thread waiter([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    rusage before{};
    getrusage(RUSAGE_THREAD, &before);
    const int64_t started = monotonic_ns();
    EXPECT_EQ(wait_for_slice(p.a), SliceWait::kGranted);
    waited_ns = monotonic_ns() - started;
    rusage after{};
    getrusage(RUSAGE_THREAD, &after);
    switches = after.ru_nvcsw - before.ru_nvcsw;
  });
  // Until it sleeps (bounded: a waiter that never sleeps fails the case).
  for (int i = 0; i < 30'000 && (tid.load() == 0 || !thread_asleep(tid.load())); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  for (int i = 0; i < 20'000; ++i) {
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&p.gpu->grant_seq), FUTEX_WAKE, INT32_MAX,
            nullptr, nullptr, 0);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&p.gpu->holder), FUTEX_WAKE, INT32_MAX, nullptr,
            nullptr, 0);
  }
  p.gpu->heartbeat_ns.store(monotonic_ns());
  p.grant(kSlot);
  waiter.join();
  // A few: falling asleep, the grant, a heartbeat re-check; and one more
  // for each kMaxFutexWaitNs the wait lasted (it looks again that often),
  // however long a busy host made it (the hostile wakes are thousands).
  const long rechecks = static_cast<long>(waited_ns.load() / kMaxFutexWaitNs);
  EXPECT_LT(switches.load(), std::max(100L, 20 + rechecks))
      << "hostile wakes woke the waiter (" << rechecks << " re-checks in its wait)";
}

// The agent removed the instance (its step ended) while a process that
// outlived the step waited: the wait ends at the removal's wake-up, not when
// the free slot is granted to the next tenant, however long that takes.
TEST(Gate, AWaitEndsWhenTheInstanceIsRemoved) {
  Pages p;
  p.a.instance_id = 42;
  p.gpu->slots[kSlot].instance_id.store(42);
  std::atomic<pid_t> tid{0};
  SliceWait outcome = SliceWait::kGranted;
  std::thread waiter([&] {
    tid = static_cast<pid_t>(syscall(SYS_gettid));
    outcome = wait_for_slice(p.a);
  });
  for (int i = 0; i < 30'000 && (tid.load() == 0 || !thread_asleep(tid.load())); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // As GpuArbiter::remove does: the slot freed, then the instance's waiters woken.
  p.gpu->slots[kSlot].instance_id.store(0);
  shm::wake_granted(&p.instance->grant_word);
  waiter.join();
  EXPECT_EQ(outcome, SliceWait::kInstanceGone);
}

TEST(Gate, StaleHeartbeatEndsTheWaitWithinTheTimeout) {
  Pages p(200 * kMs);
  const int64_t start = p.gpu->heartbeat_ns.load();  // what the timeout counts from
  EXPECT_EQ(wait_for_slice(p.a), SliceWait::kAgentDead);
  const int64_t waited = monotonic_ns() - start;
  EXPECT_GE(waited, 150 * kMs);
  EXPECT_LT(waited, 30'000 * kMs);  // not forever (a loaded machine may be late)
  EXPECT_EQ(p.instance->procs[0].busy.load(), 0u);
}

TEST(Gate, AlreadyDeadAgentIsSeenAtOnce) {
  Pages p(60'000 * kMs);
  p.gpu->heartbeat_ns.store(monotonic_ns() - 2 * p.gpu->heartbeat_timeout_ns.load());
  const int64_t start = monotonic_ns();
  EXPECT_EQ(wait_for_slice(p.a), SliceWait::kAgentDead);
  EXPECT_LT(monotonic_ns() - start, 30'000 * kMs);  // it did not wait out a timeout
  EXPECT_FALSE(shm::agent_alive(*p.gpu, monotonic_ns()));
}

TEST(Gate, RestartedAgentEndsTheWait) {
  Pages p;
  std::thread agent([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    p.gpu->agent_epoch.store(8);
    p.grant(shm::kNoHolder);
  });
  EXPECT_EQ(wait_for_slice(p.a), SliceWait::kEpochChanged);
  agent.join();
}

TEST(Gate, ZeroTimeoutNeverDeclaresTheAgentDead) {
  Pages p;
  p.gpu->heartbeat_timeout_ns.store(0);
  p.gpu->heartbeat_ns.store(1);
  EXPECT_TRUE(shm::agent_alive(*p.gpu, monotonic_ns()));
}

}  // namespace
}  // namespace egpu::shim
