// Hostile tenants, finding 4: a job lies through its own instance page. Its
// process says a thread is blocked (busy) and that it has a long tail queued,
// and never reports device time. Before the fix it won every decision (its
// FAA account never moved) and the honest job beside it starved; now the
// time it holds the slice while others wait is charged when its reports fall
// short of it (HeldTimeFloor), so the honest job keeps about its share.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <thread>

#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "enforced_node.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;
constexpr uid_t kMallory = 4242;

// A process of `job` attached as `uid` that claims in its page slot that it
// is busy with a second of work queued, forever, and launches nothing (the
// stores stay in the shared page: the agent reads the lie every tick).
pid_t start_liar(const std::string& socket, uint64_t job, uid_t uid) {
  return test::attached_process(socket, job, uid, [](const test::RawReply& att) {
    if (att.fds.size() < 3) return false;
    auto page = shm::map_fd(att.fds[1], sizeof(shm::InstancePage), shm::Access::kReadWrite);
    if (!page) return false;
    auto& me = page->as<shm::InstancePage>()->procs[att.reply.proc_slot];
    me.busy.store(1);
    me.inflight_ns.store(1'000'000'000);
    return true;
  });
}

TEST(LyingReports, AHolderThatClaimsWorkAndReportsNoneDoesNotStarveAnHonestJob) {
  EnforcedNode node("liar");
  node.create(1, 50);
  node.create(2, 50, "burst", 0, 0, kMallory);
  auto honest = node.start(1, greedy("h"));
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"h"}), 20s));
  const pid_t liar = start_liar(node.agent().socket(), 2, kMallory);
  ASSERT_GT(liar, 0) << node.agent().log();
  const auto lying_from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(7000ms);
  sampler.stop();
  // From 2 s in: the floor's allowance (100 ms) is long spent by then.
  const auto [split, used] = harness::split_of_used_time(harness::compute_shares(
      harness::samples_between(sampler.samples(), lying_from + 2000ms, lying_from + 7000ms), 0,
      harness::GroupBy::kLabel, 500ms));
  std::printf("the honest job (50 units) beside a liar (50 units): %.3f of the GPU\n", used);
  // Its share within the precision bar (3 pp). The liar is charged 95% of the
  // time it holds (HeldTimeFloorParams::rate), so it may get ~51.3%.
  EXPECT_GE(used, 0.47);
  const auto status = node.egpuctl({"status", "--json"});
  EXPECT_EQ(status.code, 0) << status.err;
  EXPECT_NE(status.out.find("unreported_charged_s"), std::string::npos);
  kill(liar, SIGKILL);
  waitpid(liar, nullptr, 0);
  stop(*honest);
}

}  // namespace
}  // namespace egpu::integration
