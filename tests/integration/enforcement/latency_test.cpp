// Latency objectives end to end on the simulated GPU: the real shim counts
// an inference server's bursts (or the requests it reports) in its instance
// page, the real agent judges them against the objective and moves share
// from a lend neighbour, never from a guaranteed one. Functional: each wait
// is for a state the agent reports, bounded only by how long to keep trying;
// what the policy achieves is measured in simulated time (tests/unit/slo).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/shm/pages.h"
#include "enforced_node.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// The latency samples in an instance's page, read as the agent reads them.
uint64_t samples_in_page(EnforcedNode& node, uint64_t instance) {
  const std::string path =
      node.agent().dir() + "/run/instance-" + std::to_string(instance) + ".d/page";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  EXPECT_GE(fd, 0) << path;
  if (fd < 0) return 0;
  void* p = mmap(nullptr, sizeof(shm::InstancePage), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return 0;
  uint64_t total = 0;
  for (const auto& count : static_cast<const shm::InstancePage*>(p)->latency_counts)
    total += count.load();
  munmap(p, sizeof(shm::InstancePage));
  return total;
}

json show(EnforcedNode& node, uint64_t instance) {
  const CtlResult r = node.egpuctl({"--json", "show", std::to_string(instance)});
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const json j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

harness::WorkloadOptions inference(const std::string& label, std::vector<std::string> args) {
  for (const char* a : {"--iters-per-us", "1"})
    args.emplace_back(a);
  return harness::WorkloadOptions{"inference-like", args, label, {}};
}

TEST(Latency, TheShimCountsBurstsUntilTheProgramReportsItsRequests) {
  EnforcedNode node("latency-signal");
  const uint64_t bursts = node.create(1, 50);
  const uint64_t reports = node.create(2, 50, "burst", 0);
  // One request at a time (closed loop): each is one burst of work.
  auto a =
      node.start(1, inference("bursts", {"--rate", "0", "--requests", "40", "--duration-s", "0"}));
  const json sa = finish(*a);
  EXPECT_EQ(sa["requests"], 40);
  // A burst ends at a sync that finds the process's queue empty by the
  // shim's estimate; one it misses merges two requests into one burst.
  const uint64_t counted = samples_in_page(node, bursts);
  EXPECT_GE(counted, 30u);
  EXPECT_LE(counted, 40u);
  auto b = node.start(2, inference("reports", {"--rate", "0", "--requests", "40", "--duration-s",
                                               "0", "--report-latency"}));
  const json sb = finish(*b);
  ASSERT_TRUE(sb["latency_reported"]["api_found"].get<bool>()) << sb.dump();
  EXPECT_EQ(sb["latency_reported"]["reported"], 40);
  // Its first request may have ended as a burst before it first reported;
  // from then on only its reports count.
  const uint64_t reported = samples_in_page(node, reports);
  EXPECT_GE(reported, 40u);
  EXPECT_LE(reported, 41u);
  const json shown = show(node, reports);
  EXPECT_GT(shown.value("burst_s", 0.0), 0.0) << shown.dump();
  EXPECT_GE(shown.value("burst_s", 0.0), shown.value("burst_gate_s", -1.0));
}

TEST(Latency, AnInferenceStepAtRiskBorrowsFromTrainingThatLendsAndGivesItBack) {
  EnforcedNode node("latency-control");
  const uint64_t serve = node.create(1, 20);
  const uint64_t train = node.create(2, 50, "lend");
  const uint64_t other = node.create(3, 30);
  // 4 ms of work per request at 100 per second: 40% of the GPU against 20 units.
  auto inf = node.start(1, inference("serve", {"--rate", "100", "--kernels-per-request", "4",
                                               "--kernel-us", "1000", "--duration-s", "0"}));
  auto lender = node.start(2, greedy("train"));
  auto guaranteed = node.start(3, greedy("other"));
  const CtlResult set = node.egpuctl({"slo", std::to_string(serve), "p99:20ms"});
  ASSERT_EQ(set.code, 0) << set.out << set.err;
  json s;
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (std::chrono::steady_clock::now() < give_up) {
    s = show(node, serve);
    if (s.value("borrowed_units", 0) > 0) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GT(s.value("borrowed_units", 0), 0) << s.dump();
  EXPECT_EQ(s["objective"], "p99:20ms");
  const int borrowed = s["borrowed_units"];
  const json t = show(node, train);
  // Loans move in steps while they are judged; what the lender gave is what
  // the borrower got at the time of each show.
  EXPECT_LT(t["target_pct"].get<double>(), 50.0);
  EXPECT_LE(t.value("borrowed_units", 0), -1);
  EXPECT_GT(s["target_pct"].get<double>(), 20.0);
  EXPECT_LE(borrowed, 49);  // the lender keeps its floor
  EXPECT_DOUBLE_EQ(show(node, other)["target_pct"].get<double>(), 30.0);
  const CtlResult status = node.egpuctl({"status"});
  EXPECT_NE(status.out.find("objective p99:20ms"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("borrowed"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("lent"), std::string::npos) << status.out;

  ASSERT_EQ(node.egpuctl({"slo", std::to_string(serve), "off"}).code, 0);
  json back;
  const auto give_up_back = std::chrono::steady_clock::now() + 30s;
  while (std::chrono::steady_clock::now() < give_up_back) {
    back = show(node, train);
    if (back["target_pct"].get<double>() == 50.0) break;
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_DOUBLE_EQ(back["target_pct"].get<double>(), 50.0) << back.dump();
  EXPECT_DOUBLE_EQ(show(node, serve)["target_pct"].get<double>(), 20.0);
  stop(*inf);
  stop(*lender);
  stop(*guaranteed);
}

TEST(Latency, BadObjectivesAreRefusedWithTheReason) {
  EnforcedNode node("latency-refusals");
  const uint64_t capped = node.create(1, 50, "cap");
  for (const auto& [value, reason] :
       std::vector<std::pair<std::string, std::string>>{{"p101:5ms", "'p101' is out of range"},
                                                        {"p99:0ms", "below 1ms"},
                                                        {"fast", "is not an objective"}}) {
    const CtlResult r = node.egpuctl({"slo", std::to_string(capped), value});
    EXPECT_EQ(r.code, 2) << value;
    EXPECT_NE(r.err.find(reason), std::string::npos) << value << ": " << r.err;
  }
  const CtlResult cap = node.egpuctl({"slo", std::to_string(capped), "p99:40ms"});
  EXPECT_EQ(cap.code, 1);
  EXPECT_NE(cap.err.find("cap mode, which never goes above its share"), std::string::npos)
      << cap.err;
}

}  // namespace
}  // namespace egpu::integration
