// The shim in a program whose threads and contexts come and go: exact
// outcomes, no share measured (process tier).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "enforced_node.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

// The environment of a program whose first launch sleeps `ms` in the
// driver, saying when it starts (SIMGPU_DEBUG_STALL_MARKER): the program
// acts once it has, with the rest of `ms` to spare, not after a guess.
std::map<std::string, std::string> stall_in_driver(EnforcedNode& node, int ms) {
  const std::string marker = node.agent().dir() + "/stall-began";
  return {{"SIMGPU_DEBUG_STALL_IN_DRIVER_MS", std::to_string(ms)},
          {"SIMGPU_DEBUG_STALL_MARKER", marker}};
}

// A thread cancelled while its cuStreamSynchronize waits for the stream's
// pacing lock (another thread holds it, stalled in the driver's launch): the
// cancellation waits for the thread's own cancellation point. Acted on in
// the lock's sleep (or in the driver's, while the shim waits for the sync),
// it unwound through the shim's noexcept code and aborted the program.
TEST(ShimLifecycle, AThreadCancelledWhileWaitingForAStreamLockLeavesTheProgramRunning) {
  EnforcedNode node("cancel-lock");
  node.create(1, 50);
  auto p = node.start_program(1, {cancelled_launcher_path(), "behind-stall"}, 0,
                              stall_in_driver(node, 3000));
  const auto out = finish(*p);
  ASSERT_TRUE(out.is_object()) << p->stderr_text();
  EXPECT_EQ(out.value("cancelled", false), true) << out.dump();
  EXPECT_EQ(out.value("launched", 0), 1) << out.dump();
  EXPECT_EQ(out.value("failed", true), false) << out.dump();
}

// A thread cancelled while its launch sleeps in the driver (a cancellation
// point there): the shim's launch path is noexcept, so an unwind acted on
// inside the real launch aborted the program. The cancellation now waits
// for the thread's own cancellation point, after the launch.
TEST(ShimLifecycle, AThreadCancelledInsideTheDriversLaunchLeavesTheProgramRunning) {
  EnforcedNode node("cancel-driver");
  node.create(1, 50);
  auto p = node.start_program(1, {cancelled_launcher_path(), "in-driver"}, 0,
                              stall_in_driver(node, 3000));
  const auto out = finish(*p);
  ASSERT_TRUE(out.is_object()) << p->stderr_text();
  EXPECT_EQ(out.value("cancelled", false), true) << out.dump();
  EXPECT_EQ(out.value("launched", 0), 1) << out.dump();
  EXPECT_EQ(out.value("failed", true), false) << out.dump();
}

// A process execs while one of its threads waits in a sync: the new image
// attaches to the same slot, and the wait the exec cut short must not count
// on. It did: the instance asked for the GPU for ever, idle.
TEST(ShimLifecycle, AnExecThatCutsAWaitShortLeavesTheInstanceIdle) {
  EnforcedNode node("exec-wait");
  node.create(1, 50);
  const std::string release = node.agent().dir() + "/release";
  auto p = node.start_program(1, {exec_while_waiting_path(), release});
  // The deadlines are for a broken shim or agent, not a measure.
  const auto end = std::chrono::steady_clock::now() + 60s;
  bool attached = false;
  while (!attached && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(50ms);
    attached = p->stdout_text().find("\"attached\": true") != std::string::npos;
  }
  ASSERT_TRUE(attached) << p->stderr_text();
  // Idle from here until released: at some look it no longer asks.
  bool idle = false;
  std::string last;
  while (!idle && std::chrono::steady_clock::now() < end) {
    const CtlResult r = node.egpuctl({"--json", "status"});
    ASSERT_EQ(r.code, 0) << r.err;
    const nlohmann::json status = nlohmann::json::parse(r.out);
    for (const auto& gpu : status.at("gpus")) {
      for (const auto& inst : gpu.at("instances")) {
        if (inst.value("job", 0) != 1 || inst.value("processes", 0) == 0) continue;
        idle = !inst.value("asking", true);
        last = inst.dump();
      }
    }
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(idle) << last;
  { std::ofstream(release.c_str()) << "go"; }
  (void)finish(*p);
}

// Contexts ended with memory still allocated in them: the driver frees it,
// and so must the quota. Before, only raised context limits came back: a
// program cycling contexts was refused once the quota was spent, holding
// nothing. Each round holds 600 MiB + 150 MiB of a 1 GiB quota.
void expect_every_round_gets_its_memory(const std::string& how) {
  SCOPED_TRACE(how);
  EnforcedNode node("ctx-cycle-" + how);
  node.create(1, 50, "burst", 0, kGiB);
  auto p = node.start_program(
      1, {memory_probe_path(), "ctx-cycle", how, std::to_string(600 * kMiB), "3"});
  const auto out = finish(*p, 60s);
  ASSERT_TRUE(out.is_object()) << p->stderr_text();
  std::printf("%s: %s\n", how.c_str(), out.dump().c_str());
  ASSERT_EQ(out["rounds"].size(), 3u) << out.dump();
  for (const auto& round : out["rounds"]) {
    EXPECT_EQ(round["alloc"], "CUDA_SUCCESS") << out.dump();
    EXPECT_EQ(round["array"], "CUDA_SUCCESS") << out.dump();
    EXPECT_EQ(round["end"], "CUDA_SUCCESS") << out.dump();
    EXPECT_LE(round["free_held"].get<uint64_t>(), kGiB - 750 * kMiB) << out.dump();
    // A release that is not the last frees nothing: still accounted.
    if (how == "release") {
      EXPECT_EQ(round["free_retained"], round["free_held"]) << out.dump();
    }
  }
  EXPECT_EQ(out["after"]["free"], kGiB) << out.dump();
}

TEST(ShimLifecycle, MemoryOfADestroyedContextComesBackToTheQuota) {
  expect_every_round_gets_its_memory("create");
}

TEST(ShimLifecycle, MemoryOfAResetPrimaryContextComesBackToTheQuota) {
  expect_every_round_gets_its_memory("reset");
}

TEST(ShimLifecycle, MemoryOfAPrimaryContextComesBackOnlyAtItsLastRelease) {
  expect_every_round_gets_its_memory("release");
}

// A job in a time namespace (unshare --time; a CRIU restore) reads
// CLOCK_MONOTONIC shifted from the agent's. Compared with its own clock,
// the agent's heartbeat looked 100000 s stale: every launch attached again
// (each attachment kept for good) in a loop that never returned, and with
// that bounded it would have run under the fail mode, unenforced. The shim
// reads its namespace's offset, and sees a live agent.
TEST(ShimLifecycle, AJobInATimeNamespaceSeesALiveAgentAndIsEnforced) {
  // --fork: the program is the namespace's child on any kernel (on some,
  // an exec'd program without a fork stays in the caller's).
  test_child::ChildOptions probe;
  probe.argv = {"/usr/bin/unshare",         "--time", "--monotonic", "7", "--fork", "/bin/cat",
                "/proc/self/timens_offsets"};
  probe.stdout_mode = test_child::OutputMode::kCapture;
  probe.stderr_mode = test_child::OutputMode::kCapture;
  test_child::ChildProcess can(probe);
  const auto st = can.wait_for(20s);
  if (!st || !st->exited || st->code != 0 ||
      can.stdout_text().find("monotonic") == std::string::npos) {
    GTEST_SKIP() << "cannot make a time namespace here (root or unprivileged user namespaces "
                    "needed): "
                 << can.stderr_text();
  }
  ASSERT_NE(can.stdout_text().find(" 7 "), std::string::npos)
      << "the probe is not in a shifted namespace: " << can.stdout_text();
  EnforcedNode node("timens");
  const uint64_t id = node.create(1, 30);
  auto job = node.start_program(1, {"/usr/bin/unshare", "--time", "--monotonic", "100000", "--fork",
                                    harness::workload_path("greedy"), "--kernels", "200",
                                    "--kernel-us", "100", "--label", "timens"});
  const nlohmann::json summary = finish(*job);
  EXPECT_EQ(summary.value("kernels", uint64_t{0}), 200u) << summary.dump();
  const std::string said = job->stderr_text();
  EXPECT_EQ(said.find("stopped responding"), std::string::npos) << said;
  EXPECT_EQ(said.find("re-attached"), std::string::npos) << said;
  // Its device time went to its instance (it was paced as the instance's).
  auto shown = node.egpuctl({"show", std::to_string(id), "--json"});
  const auto j = nlohmann::json::parse(shown.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << shown.out << shown.err;
  EXPECT_GE(j.value("device_s", 0.0), 0.015) << j.dump();
}

}  // namespace
}  // namespace egpu::integration
