// Hostile tenants, finding 6: cuMemRelease gave the quota back while the
// memory was still mapped, so a tenant that creates, maps and releases in a
// loop held as much of the GPU as the driver would give, and an honest
// neighbour within its own quota then hit the driver's out-of-memory. Now the
// bytes stay accounted until the driver frees them (the last of release and
// unmap), and the hostile tenant stops at its quota. Likewise for memory
// shared between processes: what an importer keeps alive is its to pay for.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "enforced_node.h"
#include "memory_sharing.h"
#include "simgpu_stats.h"

namespace egpu::integration {
namespace {

using namespace std::chrono_literals;
constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kGiB = 1ull << 30;

constexpr uid_t kMallory = 4242;  // the hostile tenant
constexpr uid_t kAlice = 4243;    // the honest job

TEST(QuotaLeaks, MappedReleasedMemoryCannotCrowdOutAnHonestNeighbour) {
  if (geteuid() != 0) GTEST_SKIP() << "runs its jobs as other users: needs root";
  NodeOptions options;
  options.memory_mb = 16 * 1024;  // a 16 GiB GPU: 4 GiB hostile + 8 GiB honest fit
  options.users = true;
  EnforcedNode node("quota-leak", options);
  node.create(1, 30, "burst", 0, 4 * kGiB, kMallory);
  node.create(2, 60, "burst", 0, 8 * kGiB, kAlice);
  const std::string dir = ::testing::TempDir();
  const std::string mark = dir + "/quota-leak-held", hold = dir + "/quota-leak-go";
  std::filesystem::remove(mark);
  std::filesystem::remove(hold);
  auto hostile =
      node.start_program(1, {memory_probe_path(), "vmm-fill", std::to_string(256 * kMiB), "60000"},
                         0, {{"PROBE_MARK", mark}, {"PROBE_HOLD_UNTIL", hold}}, kMallory);
  const auto end = std::chrono::steady_clock::now() + 60s;
  while (!std::filesystem::exists(mark) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(std::filesystem::exists(mark)) << hostile->stderr_text();
  // While the hostile tenant holds all it could get, the honest job fills its quota.
  auto honest = node.start_program(2, {memory_probe_path(), "fill", std::to_string(256 * kMiB)}, 0,
                                   {}, kAlice);
  auto hs = honest->wait_for(60s);
  std::ofstream(hold).put('\n');
  auto ts = hostile->wait_for(60s);
  ASSERT_TRUE(hs && hs->success()) << honest->stderr_text();
  ASSERT_TRUE(ts && ts->success()) << hostile->stderr_text();
  const auto h = nlohmann::json::parse(hostile->stdout_text());
  const auto o = nlohmann::json::parse(honest->stdout_text());
  EXPECT_EQ(h["allocated"], 4 * kGiB) << "the hostile tenant held more than its quota";
  EXPECT_EQ(h["stopped_by"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(o["allocated"], 8 * kGiB) << "the honest job did not get its quota";
  EXPECT_EQ(o["stopped_by"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(o["during"]["free"], 0u);  // refused by its quota, not by the driver
}

// Finding 6: a process that imports another's memory (IPC handle, VMM
// shareable fd, pool pointer) keeps it allocated after the exporter frees
// it, as the driver does. Before, the exporter's quota got the bytes back
// and the importer's never had them: two cooperating tenants could hold GPU
// memory that no quota counted. Now the importer's quota counts it.
TEST(QuotaLeaks, MemoryAnImporterKeepsAliveStaysCountedAfterTheExporterFrees) {
  EnforcedNode node("quota-leak-import");
  node.create(1, 20, "burst", 0, 4 * kGiB);  // the exporter
  node.create(2, 20, "burst", 0, 4 * kGiB);  // the importer
  for (const std::string kind : {"ipc", "vmm", "pool"}) {
    SCOPED_TRACE(kind);
    SharedMemoryPair pair(node, kind, 1, 2, kGiB);
    ASSERT_TRUE(pair.ready()) << pair.errors();
    const auto exported = pair.finish_exporter();
    EXPECT_EQ(exported["export"]["free"], "CUDA_SUCCESS");
    EXPECT_EQ(exported["export"]["freed"]["free"], 4 * kGiB);
    EXPECT_EQ(agent_memory_used(node, 1), 0u);
    EXPECT_EQ(simgpu_memory_used(node), kGiB);  // the importer keeps it on the device...
    EXPECT_EQ(agent_memory_used(node, 2), kGiB) << "held on the GPU but counted in no quota";
    const auto imported = pair.finish_importer();
    EXPECT_EQ(imported["import"]["release"], "CUDA_SUCCESS");
    EXPECT_EQ(simgpu_memory_used(node), 0u);  // ...until it lets go
    EXPECT_EQ(agent_memory_used(node, 2), 0u);
  }
}

}  // namespace
}  // namespace egpu::integration
