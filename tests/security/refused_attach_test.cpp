// Hostile tenants, finding 8: a refused attach was never retried, so the
// process ran unenforced for good (also under FailMode=closed, see
// shim.ShimProcess.WithoutAnAgentFailModeClosedRefusesLaunchesAndAllocations).
// Now a refused process tries again every 5 s and is enforced once it may
// attach: here its instance is created only after it started.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <thread>

#include "enforced_node.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;

TEST(RefusedAttach, AProcessRefusedAtStartIsEnforcedOnceItMayAttach) {
  EnforcedNode node("refused");
  node.create(2, 70);
  auto other = node.start(2, greedy("other"));
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"other"}), 20s));
  // Job 1 has no instance yet: its attach is refused (NotFound), and under
  // FailMode=open it runs unenforced meanwhile.
  auto early = node.start(1, greedy("early"));
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"early"}), 20s));
  const uint64_t id = node.create(1, 30);
  // The retry comes within 5 s (plus the attempt, however late a loaded
  // machine runs it); then enforcement settles.
  std::string shown;
  int processes = 0;
  for (const auto deadline = std::chrono::steady_clock::now() + 60s;
       processes != 1 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(250ms);
    const auto show = node.egpuctl({"show", std::to_string(id), "--json"});
    ASSERT_EQ(show.code, 0) << show.err;
    shown = show.out;
    processes = nlohmann::json::parse(show.out, nullptr, false).value("processes", 0);
  }
  ASSERT_EQ(processes, 1) << "the refused process never attached: " << shown;
  std::this_thread::sleep_for(2000ms);
  const auto from = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(2500ms);
  sampler.stop();
  const auto [split, used] = harness::split_of_used_time(
      harness::compute_shares(harness::samples_between(sampler.samples(), from, from + 2500ms), 0,
                              harness::GroupBy::kLabel, 500ms));
  std::printf("once the refused process attached:\n%s",
              harness::format_report(split, {{"other", 0.7}, {"early", 0.3}}).c_str());
  EXPECT_NEAR(split.share("early"), 0.30, 0.03);
  EXPECT_NEAR(split.share("other"), 0.70, 0.03);
  stop(*early);
  stop(*other);
}

}  // namespace
}  // namespace egpu::integration
