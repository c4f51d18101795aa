// A handover waits for the old holder's queued work. The tail it reports is an
// estimate (launches x their average duration) that one long kernel among
// short ones outlasts: while the old holder is blocked (its gate polls and
// publishes the tail as it drains), the agent follows that report instead of
// the estimate's deadline; a holder that does not report is still handed
// over at the deadline. The test plays both shims by writing their instance
// pages as root.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core/shm/pages.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
constexpr uid_t kOwner = 4243;
// Under the long-kernel rule (twice the 2 ms bound), over HandoverTailUs.
constexpr uint64_t kTailNs = 3'000'000;
// A wait between two looks longer than this means the test itself was
// descheduled (these VMs stall for 5-80 ms): the attempt proves nothing.
constexpr auto kMaxLookGap = 4ms;

template <typename Page>
class Mapping {
 public:
  Mapping(const std::string& path, bool writable) {
    const int fd = open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC);
    if (fd < 0) return;
    void* m = mmap(nullptr, sizeof(Page), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                   fd, 0);
    close(fd);
    if (m != MAP_FAILED) page_ = static_cast<Page*>(m);
  }
  ~Mapping() {
    if (page_ != nullptr) munmap(page_, sizeof(Page));
  }
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Page* operator->() const { return page_; }
  bool ok() const { return page_ != nullptr; }

 private:
  Page* page_ = nullptr;
};

// One job's process as the agent sees it: its slot in its instance page.
struct FakeShim {
  pid_t pid = -1;
  std::unique_ptr<Mapping<shm::InstancePage>> page;
  shm::ProcSlot* slot = nullptr;
  uint32_t gpu_slot = 0;

  // Blocked at the gate (or not); the agent is woken as a shim wakes it.
  void asking(bool blocked) {
    slot->busy.store(blocked ? 1 : 0);
    kill(pid, SIGUSR1);
  }
  void launched() { slot->launches.fetch_add(1); }
  void tail(uint64_t ns) { slot->inflight_ns.store(ns); }
};

// Jobs 1 and 2 at 50 units on GPU 0: shim(0) is job 1's process, shim(1)
// job 2's, and shim(2), if asked for, a second process of job 1.
class Node {
 public:
  bool start(bool second_process_in_job_1 = false) {
    if (!agent_.start()) return false;
    gpu_ = std::make_unique<Mapping<shm::GpuPage>>(agent_.dir() + "/run/gpu0", false);
    return gpu_->ok() && create(1) && create(2) && add_process(1) && add_process(2) &&
           (!second_process_in_job_1 || add_process(1));
  }
  ~Node() {
    for (FakeShim& s : shims_) {
      if (s.pid > 0) {
        kill(s.pid, SIGKILL);
        waitpid(s.pid, nullptr, 0);
      }
    }
  }
  FakeShim& shim(size_t i) { return shims_[i]; }
  uint32_t holder() const { return (*gpu_)->holder.load(); }
  std::string log() const { return agent_.log(); }

 private:
  bool create(uint64_t job) {
    auto created = agent_.call(create_request(job, 50, kOwner));
    if (!created || created->status != protocol::ReplyStatus::kOk) return false;
    instance_of_[job] = created->instance_id;
    return true;
  }
  bool add_process(uint64_t job) {
    FakeShim& s = shims_.emplace_back();
    s.pid = attached_process(agent_.socket(), job, kOwner);
    if (s.pid <= 0) return false;
    s.page = std::make_unique<Mapping<shm::InstancePage>>(
        agent_.dir() + "/run/instance-" + std::to_string(instance_of_[job]), true);
    if (!s.page->ok()) return false;
    s.gpu_slot = (*s.page)->gpu_slot;
    for (auto& p : (*s.page)->procs) {
      if (p.pid.load() == s.pid) s.slot = &p;
    }
    return s.slot != nullptr;
  }

  AgentProcess agent_;
  std::unique_ptr<Mapping<shm::GpuPage>> gpu_;
  std::map<uint64_t, uint64_t> instance_of_;  // job -> instance id
  std::deque<FakeShim> shims_;                // stable addresses as it grows
};

struct Look {
  Clock::duration after;
  uint32_t holder;  // the last holder seen
};

// Looks at the holder every 100 us until `done` accepts it or `limit` passes;
// nullopt if the looking itself was held up (the outcome is then unknown).
template <typename Done>
std::optional<Look> watch(const Node& node, Clock::duration limit, Done done) {
  const auto start = Clock::now();
  auto last = start;
  for (;;) {
    const uint32_t h = node.holder();
    const auto now = Clock::now();
    if (now - last > kMaxLookGap) return std::nullopt;
    last = now;
    if (done(h) || now - start > limit) return Look{now - start, h};
    std::this_thread::sleep_for(100us);
  }
}

enum class Attempt { kPassed, kFailed, kUnknown };

// Watches for `want` to hold the GPU within `limit`: kPassed once it does,
// kUnknown if the watching was held up, else kFailed saying `failure`.
Attempt expect_holder(const Node& node, uint32_t want, Clock::duration limit, const char* failure,
                      std::string* why) {
  const auto look = watch(node, limit, [want](uint32_t x) { return x == want; });
  if (!look) return Attempt::kUnknown;
  if (look->holder == want) return Attempt::kPassed;
  *why = failure;
  return Attempt::kFailed;
}

// `shim`'s job, the only one asking, is granted the GPU.
Attempt only_asker_holds(const Node& node, FakeShim& shim, std::string* why) {
  shim.asking(true);
  shim.launched();
  return expect_holder(node, shim.gpu_slot, 2s, "the only asking job was not granted the GPU", why);
}

// The holder blocks at the gate with a 3 ms tail it does not finish: the
// other job must not start while that tail is reported, well past the
// estimate's deadline (tail + 1 ms slack), and must start once it is gone.
Attempt blocked_holder_is_followed(std::string* why) {
  Node node;
  if (!node.start()) {
    *why = "set-up failed:\n" + node.log();
    return Attempt::kFailed;
  }
  for (int i : {0, 1}) {
    node.shim(i).asking(true);
    node.shim(i).launched();
  }
  const auto first = watch(node, 2s, [](uint32_t h) { return h != shm::kNoHolder; });
  if (!first) return Attempt::kUnknown;
  const uint32_t h = first->holder;
  FakeShim& old = node.shim(0).gpu_slot == h ? node.shim(0) : node.shim(1);
  FakeShim& next = node.shim(0).gpu_slot == h ? node.shim(1) : node.shim(0);
  if (old.gpu_slot != h) {
    *why = "no instance holds the GPU";
    return Attempt::kFailed;
  }
  // Charged a slice's worth, so the other job is due next.
  old.slot->device_ns.fetch_add(20'000'000);
  old.tail(kTailNs);
  old.launched();
  const auto drained = watch(node, 1s, [](uint32_t x) { return x == shm::kNoHolder; });
  if (!drained) return Attempt::kUnknown;
  if (drained->holder != shm::kNoHolder) {
    *why = "the holder's slice never ended into a drain";
    return Attempt::kFailed;
  }
  // 20 ms: five times the estimate's deadline, a third of MaxDrain (60 ms).
  const uint32_t want = next.gpu_slot;
  const auto early = watch(node, 20ms, [want](uint32_t x) { return x == want; });
  if (!early) return Attempt::kUnknown;
  if (early->holder == want) {
    *why = "the next job started " +
           std::to_string(std::chrono::duration<double, std::milli>(early->after).count()) +
           " ms into the drain, beside a tail its holder still reported";
    return Attempt::kFailed;
  }
  old.tail(0);  // its gate saw the work complete
  return expect_holder(node, want, 1s, "the next job did not start once the tail was gone", why);
}

// A holder that stopped asking says nothing more about its tail: the next
// job starts at the estimate's deadline, not after MaxDrain.
Attempt silent_holder_is_not_waited_for(std::string* why) {
  Node node;
  if (!node.start()) {
    *why = "set-up failed:\n" + node.log();
    return Attempt::kFailed;
  }
  if (const Attempt held = only_asker_holds(node, node.shim(0), why); held != Attempt::kPassed)
    return held;
  node.shim(0).tail(kTailNs);
  node.shim(0).launched();
  node.shim(0).asking(false);  // a CPU phase: idle after the agent's grace
  node.shim(1).asking(true);
  node.shim(1).launched();
  // Idle grace (0.5 ms) + deadline (tail + 1 ms slack) + polling.
  return expect_holder(node, node.shim(1).gpu_slot, 40ms,
                       "a silent holder's stale tail kept the GPU idle for 40 ms", why);
}

// Job 1's first process waits at the gate with nothing left; its second one
// launched a 3 ms tail and went on with CPU work, so its figure is its last
// word: the next job starts at the estimate's deadline, not after MaxDrain.
Attempt stale_tail_of_an_idle_process_is_not_followed(std::string* why) {
  Node node;
  if (!node.start(/*second_process_in_job_1=*/true)) {
    *why = "set-up failed:\n" + node.log();
    return Attempt::kFailed;
  }
  FakeShim& waiting = node.shim(0);
  FakeShim& idle = node.shim(2);
  FakeShim& next = node.shim(1);
  if (const Attempt held = only_asker_holds(node, waiting, why); held != Attempt::kPassed)
    return held;
  // No charges: job 2 is not far enough below job 1 to take the GPU at once
  // (that takeover, for latency, skips the drain); it is next at the slice end.
  idle.tail(kTailNs);
  idle.launched();
  next.asking(true);
  next.launched();
  // Slice (10 ms) + deadline (tail + 1 ms slack) + polling, well short of
  // MaxDrain counted from the drain's start.
  return expect_holder(node, next.gpu_slot, 40ms,
                       "an idle process's stale tail held the handover for 40 ms", why);
}

// Runs `attempt` until one is conclusive (at most 6 times) and asserts on it.
void run_attempts(Attempt (*attempt)(std::string*)) {
  constexpr int kAttempts = 6;
  for (int i = 0; i < kAttempts; ++i) {
    std::string why;
    const Attempt outcome = attempt(&why);
    if (outcome == Attempt::kUnknown) continue;
    EXPECT_EQ(outcome, Attempt::kPassed) << why;
    return;
  }
  ADD_FAILURE() << "the machine held this test up in all " << kAttempts << " attempts";
}

TEST(AgentHandoverDrain, FollowsABlockedHoldersReportPastTheEstimate) {
  run_attempts(blocked_holder_is_followed);
}

TEST(AgentHandoverDrain, StopsWaitingForASilentHolderAtTheEstimate) {
  run_attempts(silent_holder_is_not_waited_for);
}

TEST(AgentHandoverDrain, StopsWaitingForAnIdleProcessesStaleTailAtTheEstimate) {
  run_attempts(stale_tail_of_an_idle_process_is_not_followed);
}

}  // namespace
}  // namespace egpu::test
