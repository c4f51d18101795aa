// Faults: a job killed mid-run, and the agent itself killed under load.
#include <gtest/gtest.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "enforced_node.h"
#include "memory_sharing.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;

nlohmann::json show(EnforcedNode& node, uint64_t id) {
  auto r = node.egpuctl({"show", std::to_string(id), "--json"});
  EXPECT_EQ(r.code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  return j.is_discarded() ? nlohmann::json::object() : j;
}

// Instance `id` once it has no process and no memory left (the deadline is
// for a broken agent, not a measure), else as it is then.
nlohmann::json show_once_empty(EnforcedNode& node, uint64_t id) {
  const auto end = std::chrono::steady_clock::now() + 60s;
  for (;;) {
    auto j = show(node, id);
    const bool empty =
        j.value("processes", -1) == 0 && j.value("memory_used_bytes", uint64_t{1}) == 0;
    if (empty || std::chrono::steady_clock::now() > end) return j;
    std::this_thread::sleep_for(100ms);
  }
}

// A memory-probe that fills its instance's quota in `chunk` pieces and holds
// it until `go` exists or the test ends it, however slow the host (its own
// bound only ends a holder the test lost); `mark` made once all is held.
std::unique_ptr<test_child::ChildProcess> start_holder(EnforcedNode& node, uint64_t job,
                                                       uint64_t chunk, const std::string& mark,
                                                       const std::string& go) {
  std::filesystem::remove(mark);
  std::filesystem::remove(go);
  return node.start_program(job, {memory_probe_path(), "fill", std::to_string(chunk), "600000"}, 0,
                            {{"PROBE_MARK", mark}, {"PROBE_HOLD_UNTIL", go}});
}

TEST(Faults, KillingOneOfThreeJobsGivesItsShareToTheOthersAndFreesItsMemory) {
  EnforcedNode node("kill3");
  const uint64_t victim = node.create(1, 40);
  node.create(2, 30);
  node.create(3, 30);
  auto v = node.start(1, greedy("victim"));
  const std::string mark = ::testing::TempDir() + "/kill3-held";
  auto holder = start_holder(node, 1, 1ull << 30, mark, ::testing::TempDir() + "/kill3-go");
  auto a = node.start(2, greedy("a"));
  auto b = node.start(3, greedy("b"));
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"victim", "a", "b"}), 20s));
  ASSERT_TRUE(wait_for_file(mark, 60s)) << holder->stderr_text();
  auto before = show(node, victim);
  EXPECT_EQ(before.value("processes", 0), 2) << before.dump();
  EXPECT_GT(before.value("memory_used_bytes", uint64_t{0}), 1ull << 30) << before.dump();
  const auto killed_at = std::chrono::steady_clock::now();
  v->kill(SIGKILL);
  holder->kill(SIGKILL);
  std::this_thread::sleep_for(3000ms);
  sampler.stop();
  // Shares of the device time used (handover gaps are nobody's).
  const auto [after_kill, used] = harness::split_of_used_time(harness::compute_shares(
      harness::samples_between(sampler.samples(), killed_at + 500ms, killed_at + 3000ms), 0,
      harness::GroupBy::kLabel, 500ms));
  std::printf("after the kill (from one window on; GPU %.1f%% busy):\n%s", used * 100,
              harness::format_report(after_kill).c_str());
  EXPECT_GE(used, 0.85);
  EXPECT_NEAR(after_kill.share("a"), 0.50, 0.03);
  EXPECT_NEAR(after_kill.share("b"), 0.50, 0.03);
  EXPECT_LE(after_kill.share("victim"), 0.01);
  auto gone = show_once_empty(node, victim);
  EXPECT_EQ(gone.value("processes", -1), 0) << gone.dump();
  EXPECT_EQ(gone.value("memory_used_bytes", uint64_t{1}), 0u) << gone.dump();
  stop(*a);
  stop(*b);
}

TEST(Faults, AgentKilledUnderLoadNeitherCrashesNorHangsJobsAndResumes) {
  EnforcedNode node("agent-kill");
  const uint64_t a = node.create(1, 70);
  node.create(2, 30);
  auto wa = node.start(1, greedy("a"));
  auto wb = node.start(2, greedy("b"));
  const std::string mark = ::testing::TempDir() + "/agent-kill-held";
  const std::string go = ::testing::TempDir() + "/agent-kill-go";
  auto holder = start_holder(node, 1, 512ull << 20, mark, go);
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"a", "b"}), 20s));
  ASSERT_TRUE(wait_for_file(mark, 60s)) << holder->stderr_text();
  const uint64_t mem_before = show(node, a).value("memory_used_bytes", uint64_t{0});
  EXPECT_GE(mem_before, 1ull << 30);
  node.agent().kill_hard();
  std::this_thread::sleep_for(2500ms);  // jobs run on under the fail mode (open)
  EXPECT_TRUE(wa->running());
  EXPECT_TRUE(wb->running());
  ASSERT_TRUE(node.agent().start()) << node.agent().log();
  const auto restarted_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3500ms);
  sampler.stop();
  const auto [resumed, used] = harness::split_of_used_time(harness::compute_shares(
      harness::samples_between(sampler.samples(), restarted_at + 1000ms, restarted_at + 3500ms), 0,
      harness::GroupBy::kLabel, 500ms));
  EXPECT_GE(used, 0.85);
  std::printf("from 1 s after the agent restarted:\n%s",
              harness::format_report(resumed, {{"a", 0.7}, {"b", 0.3}}).c_str());
  EXPECT_NEAR(resumed.share("a"), 0.70, 0.03);
  EXPECT_NEAR(resumed.share("b"), 0.30, 0.03);
  // Nothing counted twice: the memory the job held is what it holds now.
  auto after = show(node, a);
  EXPECT_EQ(after.value("memory_used_bytes", uint64_t{0}), mem_before) << after.dump();
  EXPECT_EQ(after.value("processes", 0), 2) << after.dump();
  std::ofstream(go).put('\n');  // the holder may let go now
  stop(*wa);
  stop(*wb);
}

// A stopped agent (SIGSTOP: its socket accepts, it never answers) makes every
// re-attach wait out the shim's attach timeout. Those waits must not take the
// jobs' time: before the fix, each failed attempt left the next one already
// due, and the jobs spent the whole stop blocked in attach.
TEST(Faults, AgentStoppedUnderLoadCostsJobsLittleAndEnforcementResumes) {
  EnforcedNode node("agent-stop");
  node.create(1, 70);
  node.create(2, 30);
  auto wa = node.start(1, greedy("a"));
  auto wb = node.start(2, greedy("b"));
  harness::ShareSampler sampler(node.source(), 50ms);
  ASSERT_TRUE(sampler.wait_until(harness::labels_busy({"a", "b"}), 20s));
  std::this_thread::sleep_for(1000ms);
  ASSERT_EQ(::kill(node.agent().pid(), SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(7500ms);
  ASSERT_EQ(::kill(node.agent().pid(), SIGCONT), 0);
  const auto continued_at = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(3500ms);
  sampler.stop();
  // The heartbeat goes stale 1 s into the stop; each job's first re-attach
  // then waits 2 s, and the next may start 8 s after that (a fifth of the
  // time at most). Before the fix the GPU was close to idle all along.
  const auto [stopped, used_stopped] = harness::split_of_used_time(harness::compute_shares(
      harness::samples_between(sampler.samples(), stopped_at + 500ms, continued_at), 0,
      harness::GroupBy::kLabel, 500ms));
  std::printf("while the agent was stopped: %.2f of the GPU used\n%s", used_stopped,
              harness::format_report(stopped, {{"a", 0.7}, {"b", 0.3}}).c_str());
  EXPECT_GE(used_stopped, 0.4);
  EXPECT_TRUE(wa->running());
  EXPECT_TRUE(wb->running());
  // Continued, the agent is the same one (same epoch): shares hold again.
  const auto [resumed, used] = harness::split_of_used_time(harness::compute_shares(
      harness::samples_between(sampler.samples(), continued_at + 1000ms, continued_at + 3500ms), 0,
      harness::GroupBy::kLabel, 500ms));
  std::printf("from 1 s after the agent continued:\n%s",
              harness::format_report(resumed, {{"a", 0.7}, {"b", 0.3}}).c_str());
  EXPECT_GE(used, 0.85);
  EXPECT_NEAR(resumed.share("a"), 0.70, 0.03);
  EXPECT_NEAR(resumed.share("b"), 0.30, 0.03);
  stop(*wa);
  stop(*wb);
}

// A thread the program cancels while the shim holds it in the in-flight
// bound: the cancellation waits for the program's own cancellation point
// (NoCancelScope); acted on in the shim's sleep, it aborted the program.
TEST(Faults, AThreadCancelledWhileThrottledLeavesTheProgramRunning) {
  EnforcedNode node("cancel");
  node.create(1, 50);
  for (int run = 0; run < 3; ++run) {
    auto p = node.start_program(1, {cancelled_launcher_path()});
    const auto out = finish(*p);
    ASSERT_TRUE(out.is_object()) << "run " << run;
    EXPECT_EQ(out.value("cancelled", false), true) << out.dump();
  }
}

}  // namespace
}  // namespace egpu::integration
