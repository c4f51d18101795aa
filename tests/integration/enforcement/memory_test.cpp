// Memory quotas through the shim, with the agent's accounting.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
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

nlohmann::json run_probe(EnforcedNode& node, uint64_t job, std::vector<std::string> args) {
  args.insert(args.begin(), memory_probe_path());
  auto p = node.start_program(job, args);
  auto st = p->wait_for(60s);
  EXPECT_TRUE(st && st->success()) << p->stderr_text();
  auto j = nlohmann::json::parse(p->stdout_text(), nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << p->stdout_text() << p->stderr_text();
  return j;
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
  const std::string dir = ::testing::TempDir();
  const std::string mark = dir + "/mem-oom-held", hold = dir + "/mem-oom-go";
  std::filesystem::remove(mark);
  std::filesystem::remove(hold);
  auto p = node.start_program(1, {memory_probe_path(), "fill", std::to_string(kGiB), "60000"}, 0,
                              {{"PROBE_MARK", mark}, {"PROBE_HOLD_UNTIL", hold}});
  ASSERT_TRUE(wait_for_file(mark, 60s)) << p->stderr_text();
  const uint64_t driver_used = simgpu_memory_used(node);
  std::ofstream(hold).put('\n');
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
  // Both start allocating together (a barrier: each says it is ready, then
  // waits for the word), in small chunks, so their reservations interleave.
  // Which one the host runs first is its own business: a try in which one
  // got nothing did not race, and is tried again (the quota is checked on
  // every try).
  int raced_tries = 0;
  for (int attempt = 0; attempt < 3 && raced_tries == 0; ++attempt) {
    SCOPED_TRACE("try " + std::to_string(attempt + 1));
    EnforcedNode node("mem-two");
    node.create(1, 10, "burst", 0, 4 * kGiB);
    const std::filesystem::path barrier =
        std::filesystem::temp_directory_path() /
        ("egpu-mem-two-" + std::to_string(getpid()) + "-" + std::to_string(attempt));
    std::filesystem::remove_all(barrier);
    std::filesystem::create_directories(barrier);
    const std::map<std::string, std::string> env = {{"PROBE_BARRIER", barrier.string()}};
    const std::vector<std::string> fill = {memory_probe_path(), "fill", std::to_string(kMiB / 4),
                                           "1500"};
    auto p1 = node.start_program(1, fill, 0, env);
    auto p2 = node.start_program(1, fill, 0, env);
    const auto give_up = std::chrono::steady_clock::now() + 60s;
    const auto ready = [&] {
      int n = 0;
      for (const auto& e : std::filesystem::directory_iterator(barrier))
        n += e.path().filename().string().starts_with("ready-") ? 1 : 0;
      return n;
    };
    while (ready() < 2 && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(5ms);
    ASSERT_EQ(ready(), 2) << p1->stderr_text() << p2->stderr_text();
    std::ofstream(barrier / "go").put('1');
    std::this_thread::sleep_for(1000ms);  // both hold what they got for 1.5 s
    const uint64_t driver_used = simgpu_memory_used(node);
    auto s1 = p1->wait_for(60s);
    auto s2 = p2->wait_for(60s);
    std::filesystem::remove_all(barrier);
    ASSERT_TRUE(s1 && s1->success() && s2 && s2->success())
        << p1->stderr_text() << p2->stderr_text();
    auto j1 = nlohmann::json::parse(p1->stdout_text());
    auto j2 = nlohmann::json::parse(p2->stdout_text());
    const uint64_t total = j1["allocated"].get<uint64_t>() + j2["allocated"].get<uint64_t>();
    EXPECT_EQ(total, 4 * kGiB) << j1.dump() << j2.dump();
    EXPECT_LE(driver_used, 4 * kGiB);
    if (j1["allocated"].get<uint64_t>() > 0 && j2["allocated"].get<uint64_t>() > 0) ++raced_tries;
  }
  EXPECT_EQ(raced_tries, 1) << "in three tries, one process always got all of the quota";
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

// Finding 6: the create -> map -> release idiom of the CUDA samples. The
// driver frees the memory only at the last of release and unmap (a retained
// handle is one more reference), and so does the quota.
TEST(Memory, MappedVmmMemoryStaysCountedUntilUnmappedAndReleased) {
  EnforcedNode node("mem-vmm");
  node.create(1, 20, "burst", 0, 4 * kGiB);
  const std::string dir = ::testing::TempDir();
  const std::string mark = dir + "/vmm-mapped", hold = dir + "/vmm-go";
  std::filesystem::remove(mark);
  std::filesystem::remove(hold);
  auto p = node.start_program(1, {memory_probe_path(), "vmm-release-mapped", std::to_string(kGiB)},
                              0, {{"PROBE_MARK", mark}, {"PROBE_HOLD_UNTIL", hold}});
  ASSERT_TRUE(wait_for_file(mark, 30s)) << p->stderr_text();
  // Released but mapped (and retained): the agent sees the instance hold it.
  EXPECT_EQ(agent_memory_used(node, 1), kGiB);
  EXPECT_EQ(simgpu_memory_used(node), kGiB);
  std::ofstream(hold).put('\n');
  auto st = p->wait_for(60s);
  ASSERT_TRUE(st && st->success()) << p->stderr_text();
  auto j = nlohmann::json::parse(p->stdout_text());
  const uint64_t quota = 4 * kGiB;
  EXPECT_EQ(j["vmm"]["released_mapped"]["free"], quota - kGiB);
  EXPECT_EQ(j["vmm"]["unmapped_retained"]["free"], quota - kGiB);  // the retained reference
  EXPECT_EQ(j["vmm"]["released_all"]["free"], quota);
  EXPECT_EQ(agent_memory_used(node, 1), 0u);
}

TEST(Memory, MappedAndReleasedVmmMemoryCannotExceedTheQuota) {
  EnforcedNode node("mem-vmm-fill");
  node.create(1, 20, "burst", 0, 4 * kGiB);
  auto j = run_probe(node, 1, {"vmm-fill", std::to_string(256 * kMiB)});
  EXPECT_EQ(j["allocated"], 4 * kGiB);
  EXPECT_EQ(j["stopped_by"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["during"]["free"], 0u);
  EXPECT_EQ(j["after"]["free"], 4 * kGiB);
}

// cuMemCreate at a host location (NCCL allocates its proxy buffers so) is
// pinned host memory: counted against the GPU quota it would refuse NCCL's
// start-up in an instance smaller than its host buffers, and show the job
// less device memory than it has.
TEST(Memory, HostMemoryFromCuMemCreateIsNotCountedAgainstTheGpuQuota) {
  EnforcedNode node("mem-vmm-host");
  node.create(1, 20, "burst", 0, 4 * kGiB);
  const uint64_t quota = 4 * kGiB;
  auto j = run_probe(node, 1, {"vmm-host", std::to_string(6 * kGiB)});
  EXPECT_EQ(j["vmm"]["create"], "CUDA_SUCCESS");
  EXPECT_EQ(j["vmm"]["before"]["free"], quota);
  EXPECT_EQ(j["vmm"]["mapped"]["free"], quota);
  EXPECT_EQ(j["vmm"]["after"]["free"], quota);
  EXPECT_EQ(agent_memory_used(node, 1), 0u);
}

// Finding 6: cuCtxSetLimit makes the driver allocate the malloc heap and the
// stack (per thread the device holds: 132 SMs x 2048 threads on simgpu).
TEST(Memory, ContextLimitsAreCountedAndRefusedOverQuota) {
  EnforcedNode node("mem-limits");
  node.create(1, 20, "burst", 0, 4 * kGiB);
  const uint64_t quota = 4 * kGiB;
  const uint64_t threads = 132 * 2048;
  // Within the quota: the increase over the defaults (8 MiB heap, 1 KiB stack).
  auto j = run_probe(node, 1, {"ctx-limit", std::to_string(kGiB), "4096"});
  EXPECT_EQ(j["limits"]["heap"], "CUDA_SUCCESS");
  EXPECT_EQ(j["limits"]["after_heap"]["free"], quota - (kGiB - 8 * kMiB));
  EXPECT_EQ(j["limits"]["stack"], "CUDA_SUCCESS");
  EXPECT_EQ(j["limits"]["after_stack"]["free"], quota - (kGiB - 8 * kMiB) - 3072 * threads);
  EXPECT_EQ(j["limits"]["lowered"]["free"], quota);
  // Over the quota: refused before the driver allocates anything.
  j = run_probe(node, 1, {"ctx-limit", std::to_string(8 * kGiB), "65536"});
  EXPECT_EQ(j["limits"]["heap"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["limits"]["after_heap"]["free"], quota);
  EXPECT_EQ(j["limits"]["stack"], "CUDA_ERROR_OUT_OF_MEMORY");  // 64 KiB x 270336 threads
  EXPECT_EQ(simgpu_memory_used(node), 0u);
  EXPECT_EQ(agent_memory_used(node, 1), 0u);
}

// Graph memory: the driver maps a graph's allocations at its first launch
// from the process's graph pool; they stay mapped to the graph across
// launches, and the pool keeps them after the graph is destroyed, until
// cuDeviceGraphMemTrim. Counting the captured cuMemAllocAsync and its free
// would count nothing: the pool is what counts. A launch the quota cannot
// back is refused before the driver maps anything, nested graphs included;
// one the pool's free part backs needs no quota.
TEST(Memory, GraphMemoryCountsThePoolTheDriverKeeps) {
  EnforcedNode node("mem-graph");
  node.create(1, 20, "burst", 0, 4 * kGiB);
  const uint64_t quota = 4 * kGiB;
  const auto j = run_probe(
      node, 1, {"graph-pool", std::to_string(3 * kGiB), std::to_string(5 * kGiB)})["graphs"];
  EXPECT_EQ(j["captured"]["free"], quota);  // a captured allocation is only a node
  EXPECT_EQ(j["launch"], "CUDA_SUCCESS");
  EXPECT_EQ(j["reserved"], 3 * kGiB);
  EXPECT_EQ(j["launched"]["free"], quota - 3 * kGiB);  // freed in the graph, kept by the pool
  EXPECT_EQ(j["relaunch"], "CUDA_SUCCESS");            // mapped already: nothing more
  EXPECT_EQ(j["alloc_beside_pool"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["destroyed"]["free"], quota - 3 * kGiB);
  EXPECT_EQ(j["second_launch"], "CUDA_SUCCESS");  // the pool's free part backs it
  EXPECT_EQ(j["second_reserved"], 3 * kGiB);
  EXPECT_EQ(j["trim"], "CUDA_SUCCESS");
  EXPECT_EQ(j["trimmed"]["free"], quota);
  EXPECT_EQ(j["alloc_after_trim"], "CUDA_SUCCESS");
  EXPECT_EQ(j["big_launch"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["big_upload"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["child"], "CUDA_SUCCESS");
  EXPECT_EQ(j["child_launch"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["big_reserved"], 0u);  // the driver never backed them
  EXPECT_EQ(j["big"]["free"], quota);
  EXPECT_EQ(j["last_launch"], "CUDA_SUCCESS");
  EXPECT_EQ(j["before_reset"]["free"], quota - 3 * kGiB);
  EXPECT_EQ(j["after_reset"]["free"], quota);  // the pool went with the context
  EXPECT_EQ(simgpu_memory_used(node), 0u);
  EXPECT_EQ(agent_memory_used(node, 1), 0u);
}

// A stream-ordered pool keeps freed memory up to its release threshold
// (PyTorch's cudaMallocAsync backend: all of it) until trimmed, and at
// threshold 0 until a synchronisation: the pool's size is what counts, not
// its live allocations, and an allocation from what it keeps needs no quota.
TEST(Memory, MemoryPoolsCountWhatTheyKeep) {
  EnforcedNode node("mem-pool");
  node.create(1, 20, "burst", 0, 4 * kGiB);
  const uint64_t quota = 4 * kGiB;
  const auto j = run_probe(
      node, 1, {"pool-keep", std::to_string(3 * kGiB), std::to_string(5 * kGiB)})["pools"];
  EXPECT_EQ(j["alloc"], "CUDA_SUCCESS");
  EXPECT_EQ(j["reserved"], 3 * kGiB);
  EXPECT_EQ(j["kept"]["free"], quota - 3 * kGiB);  // freed, kept by the pool
  EXPECT_EQ(j["alloc_beside_pool"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["realloc"], "CUDA_SUCCESS");  // from what the pool keeps
  EXPECT_EQ(j["trim"], "CUDA_SUCCESS");
  EXPECT_EQ(j["trimmed"]["free"], quota);
  EXPECT_EQ(j["alloc_after_trim"], "CUDA_SUCCESS");
  EXPECT_EQ(j["alloc_at_0"], "CUDA_SUCCESS");
  EXPECT_EQ(j["freed_unsynced"]["free"], quota - 3 * kGiB);
  EXPECT_EQ(j["synced"]["free"], quota);  // given back at the synchronisation
  EXPECT_EQ(j["too_big"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["after_big"]["free"], quota);
  EXPECT_EQ(j["own_kept"]["free"], quota - 3 * kGiB);
  EXPECT_EQ(j["own_destroy"], "CUDA_SUCCESS");
  EXPECT_EQ(j["own_destroyed"]["free"], quota);  // what it kept went with it
  // Rounds of 1.25 GiB that the pool cannot reuse before a synchronisation:
  // the free part counts while the instance is within its quota (rounds 2
  // to 4 grow the pool anyway, charged after the fact; the 4th past the
  // quota), then no more: less than a round past the quota.
  EXPECT_EQ(j["growth_rounds"], 4);
  EXPECT_EQ(j["growth_reserved"], 4 * (5 * kGiB / 4));
  EXPECT_EQ(j["live_destroy"], "CUDA_SUCCESS");
  EXPECT_EQ(j["alloc_beside_live"], "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(j["after_reset"]["free"], quota);
  EXPECT_EQ(simgpu_memory_used(node), 0u);
  EXPECT_EQ(agent_memory_used(node, 1), 0u);
}

// Finding 6: memory imported from another process (an IPC handle, a VMM
// shareable fd, a pool pointer) is kept allocated by the importer, so it
// counts against the importer's quota until closed or released. The device
// holds it once: the exporter's quota counts it too while the exporter has it.
TEST(Memory, ImportedMemoryCountsAtTheImporterUntilReleased) {
  EnforcedNode node("mem-import");
  node.create(1, 20, "burst", 0, 4 * kGiB);  // the exporter
  node.create(2, 20, "burst", 0, 4 * kGiB);  // the importer
  for (const std::string kind : {"ipc", "vmm", "pool"}) {
    SCOPED_TRACE(kind);
    SharedMemoryPair pair(node, kind, 1, 2, kGiB);
    ASSERT_TRUE(pair.ready()) << pair.errors();
    EXPECT_EQ(agent_memory_used(node, 2), kGiB);
    EXPECT_EQ(agent_memory_used(node, 1), kGiB);
    EXPECT_EQ(simgpu_memory_used(node), kGiB);  // one allocation on the device
    const auto imported = pair.finish_importer();
    EXPECT_EQ(imported["import"]["imported"], "CUDA_SUCCESS");
    EXPECT_EQ(imported["import"]["held"]["free"], 3 * kGiB);
    EXPECT_EQ(imported["import"]["release"], "CUDA_SUCCESS");
    EXPECT_EQ(imported["import"]["released"]["free"], 4 * kGiB);
    if (kind == "ipc") {  // reopened: counted once, until the last close
      EXPECT_EQ(imported["import"]["reopened"], "CUDA_SUCCESS");
      EXPECT_EQ(imported["import"]["reopened_same"], true);
      EXPECT_EQ(imported["import"]["after_first_close"]["free"], 3 * kGiB);
    }
    EXPECT_EQ(agent_memory_used(node, 2), 0u);
    EXPECT_EQ(agent_memory_used(node, 1), kGiB);
    const auto exported = pair.finish_exporter();
    EXPECT_EQ(exported["export"]["free"], "CUDA_SUCCESS");
    EXPECT_EQ(agent_memory_used(node, 1), 0u);
    EXPECT_EQ(simgpu_memory_used(node), 0u);
  }
}

// Finding 6: an import the importer's quota cannot hold is refused with
// CUDA_ERROR_OUT_OF_MEMORY (a VMM import when mapped: its size shows there),
// and nothing stays counted or open.
TEST(Memory, ImportPastTheImportersQuotaIsRefused) {
  EnforcedNode node("mem-import-oom");
  node.create(1, 20, "burst", 0, 4 * kGiB);  // the exporter
  node.create(2, 10, "burst", 0, kGiB);      // the importer: less than what is shared
  for (const std::string kind : {"ipc", "vmm", "pool"}) {
    SCOPED_TRACE(kind);
    SharedMemoryPair pair(node, kind, 1, 2, 2 * kGiB);
    ASSERT_TRUE(pair.ready()) << pair.errors();
    EXPECT_EQ(agent_memory_used(node, 2), 0u);
    EXPECT_EQ(simgpu_memory_used(node), 2 * kGiB);
    const auto imported = pair.finish_importer();
    if (kind == "vmm") {
      EXPECT_EQ(imported["import"]["mapped"], "CUDA_ERROR_OUT_OF_MEMORY");
    } else {
      EXPECT_EQ(imported["import"]["imported"], "CUDA_ERROR_OUT_OF_MEMORY");
    }
    EXPECT_EQ(imported["import"]["held"]["free"], kGiB);
    pair.finish_exporter();
    EXPECT_EQ(simgpu_memory_used(node), 0u);  // the refused import was closed again
    EXPECT_EQ(agent_memory_used(node, 2), 0u);
  }
}

}  // namespace
}  // namespace egpu::integration
