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
#include <nlohmann/json.hpp>
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

// A process of Mallory's that never asks for the GPU says its work took a
// day. The device time egpuctl status (and the metric) shows for her
// instance is what FAA charged, within the time that passed; what her
// shims said is shown apart, as theirs.
TEST(LyingReports, AnOverReportIsNotTheDeviceTimeShown) {
  EnforcedNode node("over-report");
  node.create(1, 50);
  node.create(2, 50, "burst", 0, 0, kMallory);
  auto honest = node.start(1, greedy("h"));
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"h"}), 20s));
  sampler.stop();
  const auto lying_from = std::chrono::steady_clock::now();
  const pid_t liar =
      test::attached_process(node.agent().socket(), 2, kMallory, [](const test::RawReply& att) {
        if (att.fds.size() < 3) return false;
        auto page = shm::map_fd(att.fds[1], sizeof(shm::InstancePage), shm::Access::kReadWrite);
        if (!page) return false;
        page->as<shm::InstancePage>()->procs[att.reply.proc_slot].device_ns.store(
            86'400'000'000'000ull);
        return true;
      });
  ASSERT_GT(liar, 0) << node.agent().log();
  double shown = -1;
  double reported = -1;
  for (int i = 0; i < 100 && reported < 3600; ++i) {
    std::this_thread::sleep_for(100ms);
    const auto status = node.egpuctl({"--json", "status"});
    ASSERT_EQ(status.code, 0) << status.err;
    const nlohmann::json parsed = nlohmann::json::parse(status.out);
    for (const auto& gpu : parsed.at("gpus")) {
      for (const auto& inst : gpu.at("instances")) {
        if (inst.value("job", 0) != 2) continue;
        shown = inst.value("device_s", -1.0);
        reported = inst.value("reported_device_s", -1.0);
      }
    }
  }
  const double passed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - lying_from).count();
  EXPECT_GE(reported, 3600) << "the agent takes at most an hour of progress per look";
  EXPECT_GE(shown, 0);
  EXPECT_LE(shown, passed) << "shown " << shown << " s of device time in " << passed << " s";
  kill(liar, SIGKILL);
  waitpid(liar, nullptr, 0);
  stop(*honest);
}

}  // namespace
}  // namespace egpu::integration
