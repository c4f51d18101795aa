// Memory quotas through the shim, with the agent's accounting.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "enforced_node.h"
#include "simgpu_stats.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

nlohmann::json run_probe(EnforcedNode& node, uint64_t job, std::vector<std::string> args) {
  args.insert(args.begin(), memory_probe_path());
  auto p = node.start_program(job, args);
  auto st = p->wait_for(60s);
  EXPECT_TRUE(st && st->success()) << p->stderr_text();
  auto j = nlohmann::json::parse(p->stdout_text(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << p->stdout_text() << p->stderr_text();
  return j;
}

uint64_t simgpu_memory_used(EnforcedNode& node) {
  std::string error;
  auto reader = simgpu::StatsReader::open(node.gpu().shm_name(), &error);
  if (!reader) return 0;
  return reader->sample().devices.at(0).memory_used_bytes;
}

TEST(Memory, QuotaIsWhatTheProcessSees) {
  EnforcedNode node("mem-info");
  node.create(1, 10);  // 10% of 80 GiB
  auto j = run_probe(node, 1, {"info"});
  const uint64_t quota = 80 * kGiB / 100 * 10;
  EXPECT_EQ(j["before"]["total"], quota);
  EXPECT_EQ(j["before"]["device_total"], quota);
  EXPECT_EQ(j["before"]["free"], quota);
}

TEST(Memory, OverQuotaFailsWithOutOfMemoryWithoutReachingTheDriver) {
  EnforcedNode node("mem-oom");
  node.create(1, 10, "burst", 0, 5 * kGiB);
  auto p = node.start_program(1, {memory_probe_path(), "fill", std::to_string(kGiB), "1500"});
  std::this_thread::sleep_for(1000ms);
  const uint64_t driver_used = simgpu_memory_used(node);
  auto st = p->wait_for(60s);
  ASSERT_TRUE(st && st->success()) << p->stderr_text();
  auto j = nlohmann::json::parse(p->stdout_text());
  EXPECT_EQ(j["allocated"], 5 * kGiB);
  EXPECT_EQ(j["stopped_by"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["during"]["free"], 0u);
  // The refused allocation never reached the (80 GiB) driver.
  EXPECT_EQ(driver_used, 5 * kGiB);
}

TEST(Memory, TwoProcessesOfOneInstanceAllocatingAtOnceNeverExceedTheQuota) {
  EnforcedNode node("mem-two");
  node.create(1, 10, "burst", 0, 4 * kGiB);
  // Both start allocating at the same moment, in small chunks, so their
  // reservations interleave.
  const auto start_at = std::chrono::duration_cast<std::chrono::milliseconds>(
                            (std::chrono::system_clock::now() + 500ms).time_since_epoch())
                            .count();
  const std::map<std::string, std::string> env = {{"PROBE_START_AT", std::to_string(start_at)}};
  auto p1 =
      node.start_program(1, {memory_probe_path(), "fill", std::to_string(kMiB), "1500"}, 0, env);
  auto p2 =
      node.start_program(1, {memory_probe_path(), "fill", std::to_string(kMiB), "1500"}, 0, env);
  std::this_thread::sleep_for(1500ms);
  const uint64_t driver_used = simgpu_memory_used(node);
  auto s1 = p1->wait_for(60s);
  auto s2 = p2->wait_for(60s);
  ASSERT_TRUE(s1 && s1->success() && s2 && s2->success()) << p1->stderr_text() << p2->stderr_text();
  auto j1 = nlohmann::json::parse(p1->stdout_text());
  auto j2 = nlohmann::json::parse(p2->stdout_text());
  const uint64_t total = j1["allocated"].get<uint64_t>() + j2["allocated"].get<uint64_t>();
  EXPECT_EQ(total, 4 * kGiB) << j1.dump() << j2.dump();
  EXPECT_LE(driver_used, 4 * kGiB);
  EXPECT_GT(j1["allocated"].get<uint64_t>(), 0u);
  EXPECT_GT(j2["allocated"].get<uint64_t>(), 0u);
}

TEST(Memory, EveryAllocationApiIsCountedAndReleased) {
  EnforcedNode node("mem-apis");
  node.create(1, 20);
  auto j = run_probe(node, 1, {"each-api", std::to_string(64 * kMiB)});
  const uint64_t quota = j["before"]["total"];
  for (const auto& [api, r] : j["apis"].items()) {
    SCOPED_TRACE(api);
    EXPECT_EQ(r["alloc"], "CUDA_SUCCESS");
    EXPECT_EQ(r.value("release", std::string()), "CUDA_SUCCESS");
    // The quota's free memory dropped by (about) the allocation...
    EXPECT_GE(r["free_drop"].get<long long>(), static_cast<long long>(60 * kMiB));
    EXPECT_LE(r["free_drop"].get<long long>(), static_cast<long long>(80 * kMiB));
    // ...and came back when it was released.
    EXPECT_EQ(r["free_after_release"], quota);
  }
  EXPECT_EQ(j["apis"].size(), 9u);
}

}  // namespace
}  // namespace egpu::integration
