// A job's process that unsets LD_PRELOAD reaches the GPU without the shim:
// unpaced and uncounted, it escapes its share and quota. The agent finds it
// (it holds and maps the GPU's device file and never attached) and, by
// default, kills it (UnmanagedProcesses=kill); the job's shimmed processes
// and its neighbour run on. With UnmanagedProcesses=report it is listed and
// left.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "enforced_node.h"
#include "simgpu_env.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;

constexpr uid_t kMallory = 4242;  // the tenant that escapes
constexpr uid_t kAlice = 4243;    // the honest neighbour

std::vector<std::string> greedy_argv(const std::string& label) {
  return {harness::workload_path("greedy"),
          "--duration-s",
          "0",
          "--iters-per-us",
          "1",
          "--label",
          label};
}

// Without the shim: LD_PRELOAD empty, everything else as the job's.
const std::map<std::string, std::string> kNoShim = {{"LD_PRELOAD", ""}};

nlohmann::json unmanaged_status(EnforcedNode& node) {
  const CtlResult r = node.egpuctl({"status", "--json"});
  if (r.code != 0) return nullptr;
  return nlohmann::json::parse(r.out)["agent"]["unmanaged_processes"];
}

// Until instance `id` has `n` processes attached (the deadline is for a
// broken agent, not a measure).
bool attached_within(EnforcedNode& node, uint64_t id, int n) {
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < end) {
    const CtlResult r = node.egpuctl({"show", std::to_string(id), "--json"});
    const auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (r.code == 0 && j.is_object() && j.value("processes", 0) >= n) return true;
    std::this_thread::sleep_for(100ms);
  }
  return false;
}

// The unmanaged part of the status once `seen` holds for it, or the last
// one looked at a minute or two on (the deadline is for a broken agent).
nlohmann::json unmanaged_status_once(EnforcedNode& node,
                                     const std::function<bool(const nlohmann::json&)>& seen) {
  const auto end = std::chrono::steady_clock::now() + 120s;
  nlohmann::json s;
  while (std::chrono::steady_clock::now() < end) {
    s = unmanaged_status(node);
    if (s.is_object() && seen(s)) break;
    std::this_thread::sleep_for(200ms);
  }
  return s;
}

// A node whose agent reports processes without the shim (leaves them), with
// Mallory's job 1 of 50 units.
std::unique_ptr<EnforcedNode> reporting_node(const std::string& name) {
  NodeOptions options;
  options.users = true;
  options.agent_config = "UnmanagedProcesses=report\n";
  auto node = std::make_unique<EnforcedNode>(name, options);
  node->create(1, 50, "burst", 0, 0, kMallory);
  return node;
}

bool listed(const nlohmann::json& status, pid_t pid, bool acted) {
  if (!status.is_object()) return false;
  for (const auto& p : status["processes"]) {
    if (p["pid"] == pid && p["acted"] == acted) return true;
  }
  return false;
}

TEST(UnmanagedProcesses, AProcessWithoutTheShimIsKilledAndItsJobsOthersRunOn) {
  if (geteuid() != 0) GTEST_SKIP() << "runs its jobs as other users: needs root";
  NodeOptions options;
  options.users = true;
  EnforcedNode node("unmanaged-kill", options);
  const uint64_t mallory = node.create(1, 50, "burst", 0, 0, kMallory);
  const uint64_t alice = node.create(2, 50, "burst", 0, 0, kAlice);
  auto honest = node.start_program(2, greedy_argv("alice"), 0, {}, kAlice);
  auto shimmed = node.start_program(1, greedy_argv("mallory"), 0, {}, kMallory);
  // Attached first: a shimmed process seen twice between its cuInit and its
  // attach, while its user's streak runs, would be judged unattached.
  ASSERT_TRUE(attached_within(node, mallory, 1)) << node.agent().log();
  ASSERT_TRUE(attached_within(node, alice, 1)) << node.agent().log();
  auto escaped = node.start_program(1, greedy_argv("escaped"), 0, kNoShim, kMallory);
  // It runs until something stops it: the agent, within its grace and a
  // scan or two (the deadline is for a broken agent, not a measure).
  const auto status = escaped->wait_for(60s);
  ASSERT_TRUE(status) << "the process without the shim is still running\n" << node.agent().log();
  EXPECT_EQ(status->describe(), "signal 9 (Killed)") << escaped->stderr_text();
  // Three more scans judge the others, each past the grace by then.
  const auto after = unmanaged_status(node);
  ASSERT_TRUE(after.is_object());
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < end &&
         unmanaged_status(node).value("scans", 0) < after.value("scans", 0) + 3) {
    std::this_thread::sleep_for(200ms);
  }
  EXPECT_GE(unmanaged_status(node).value("scans", 0), after.value("scans", 0) + 3);
  EXPECT_FALSE(honest->wait_for(0ms)) << "the neighbour stopped: " << honest->stderr_text();
  EXPECT_FALSE(shimmed->wait_for(0ms))
      << "the job's shimmed process stopped: " << shimmed->stderr_text();
  const auto s = unmanaged_status(node);
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s["action"], "kill");
  EXPECT_EQ(s["killed_total"], 1) << s.dump();
  EXPECT_NE(node.agent().log().find("uses the GPU without the egpu shim"), std::string::npos);
  EXPECT_NE(node.agent().log().find("(1.0): killed"), std::string::npos) << node.agent().log();
  stop(*honest);
  stop(*shimmed);
}

TEST(UnmanagedProcesses, ReportListsTheProcessToItsOwnerAndRootAndLeavesIt) {
  if (geteuid() != 0) GTEST_SKIP() << "runs its jobs as other users: needs root";
  auto reporting = reporting_node("unmanaged-report");
  EnforcedNode& node = *reporting;
  auto escaped = node.start_program(1, greedy_argv("escaped"), 0, kNoShim, kMallory);
  const nlohmann::json s =
      unmanaged_status_once(node, [&](const auto& j) { return listed(j, escaped->pid(), true); });
  ASSERT_TRUE(listed(s, escaped->pid(), true)) << s.dump() << "\n" << node.agent().log();
  EXPECT_EQ(s["action"], "report");
  EXPECT_EQ(s["killed_total"], 0);
  EXPECT_GE(s["acted_total"], 1);
  EXPECT_FALSE(escaped->wait_for(0ms)) << "reported, yet stopped: " << escaped->stderr_text();
  EXPECT_NE(node.agent().log().find("reported (UnmanagedProcesses=report)"), std::string::npos);
  stop(*escaped);
}

// Many processes without the shim, each a warning line the first time it is
// judged: a user's lines are bounded by its log budget (20 at once, then one
// a second), so one job cannot push the agent's other warnings past
// journald's rate limit; every process is still acted on and listed.
TEST(UnmanagedProcesses, ManyProcessesWithoutTheShimLogWithinTheirUsersBudget) {
  if (geteuid() != 0) GTEST_SKIP() << "runs its jobs as other users: needs root";
  auto reporting = reporting_node("unmanaged-many");
  EnforcedNode& node = *reporting;
  char tmpl[] = "/tmp/egpu-unmanaged-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0755);
  const std::string release = dir + "/release";
  // Each holds the GPU open, nothing running, until released.
  constexpr int kProcesses = 30;
  std::map<std::string, std::string> env = kNoShim;
  env["PROBE_HOLD_UNTIL"] = release;
  std::vector<std::unique_ptr<test_child::ChildProcess>> escaped;
  const auto started = std::chrono::steady_clock::now();
  for (int i = 0; i < kProcesses; ++i) {
    escaped.push_back(node.start_program(
        1, {memory_probe_path(), "fill", std::to_string(1ull << 40), "600000"}, 0, env, kMallory));
  }
  const nlohmann::json s = unmanaged_status_once(
      node, [&](const auto& j) { return j.value("acted_total", 0) >= kProcesses; });
  ASSERT_GE(s.value("acted_total", 0), kProcesses) << s.dump() << "\n" << node.agent().log();
  for (const auto& p : escaped)
    EXPECT_TRUE(listed(s, p->pid(), true)) << p->pid() << " not listed: " << s.dump();
  const std::string log = node.agent().log();
  int lines = 0;
  for (size_t at = log.find("uses the GPU"); at != std::string::npos;
       at = log.find("uses the GPU", at + 1))
    ++lines;
  EXPECT_GE(lines, 1) << log;
  // 20 at once and one a second since the first could be judged (a slow
  // host that spread the judging over 10 s allows a line for each).
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started)
          .count();
  EXPECT_LE(lines, 21 + seconds) << log;
  std::printf("%d processes judged in %lld s, %d warning lines\n", kProcesses,
              static_cast<long long>(seconds), lines);
  { std::ofstream(release.c_str()) << "go"; }
  for (auto& p : escaped) {
    const auto st = p->wait_for(60s);  // released: each ends on its own
    EXPECT_TRUE(st && st->success()) << p->stderr_text();
    if (!st) p->kill(SIGKILL);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace egpu::integration
