// What a job can read about its co-tenants. Each of its processes maps its
// GPU's page (read-only) to follow the grant; that page once also recorded
// every instance on the GPU: job and step ids, uid and gid, quota, objective
// and the pid whose end ends it. A job now finds there only what its own
// shims enforce; the record a restarted agent needs is in a page of root's
// that no job is handed.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "core/protocol/messages.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "tests/agent/agent_fixture.h"
#include "tests/security/tenants.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;

// Distinctive values: a byte scan of the page finds no such word by chance.
constexpr uint64_t kNeighbourJob = 3'141'592'653;

// Aligned words of `size` bytes equal to `value` in the `bytes` bytes at `p`.
template <typename Word>
int count_words(const void* p, size_t bytes, Word value) {
  int n = 0;
  for (size_t at = 0; at + sizeof(Word) <= bytes; at += sizeof(Word)) {
    Word w;
    std::memcpy(&w, static_cast<const char*>(p) + at, sizeof w);
    n += w == value ? 1 : 0;
  }
  return n;
}

TEST(GpuPagePrivacy, AJobReadsNothingOfItsNeighboursFromItsGpuPage) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(kMalloryJob, 40, kMallory))->status, ReplyStatus::kOk);
  protocol::CreateRequest neighbour = create_request(kNeighbourJob, 60, kHonest);
  neighbour.flags |= protocol::kCreateEndsWithCaller;  // this process's end ends it
  const pid_t creator = ::getpid();
  auto made = agent.call(neighbour);
  ASSERT_EQ(made->status, ReplyStatus::kOk) << made->text;

  // What Mallory's process finds in the page it maps: a bit per finding.
  constexpr int kNoAttach = 1, kNoOwnGrant = 2, kJobId = 4, kUid = 8, kCreator = 16;
  const std::string socket = agent.socket();
  const int found = run_as(kMallory, [&socket, creator]() -> int {
    auto att = attach(socket, kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return kNoAttach;
    auto page = shm::map_fd(att->fds[kGpuPageFd], sizeof(shm::GpuPage), shm::Access::kReadOnly);
    if (!page) return kNoAttach;
    const auto* gpu = page->as<const shm::GpuPage>();
    int bits = 0;
    // What its shims need of its own slot is there...
    const shm::SlotGrant& own = gpu->slots[att->reply.gpu_slot];
    if (own.instance_id.load() != att->reply.instance_id || own.units.load() != 40) {
      bits |= kNoOwnGrant;
    }
    // ...and nothing of who the neighbour is (its units and memory limit are
    // there: its shims enforce them).
    if (count_words<uint64_t>(gpu, sizeof *gpu, kNeighbourJob) != 0 ||
        count_words<uint32_t>(gpu, sizeof *gpu, static_cast<uint32_t>(kNeighbourJob)) != 0) {
      bits |= kJobId;
    }
    if (count_words<uint32_t>(gpu->slots, sizeof gpu->slots, kHonest) != 0) bits |= kUid;
    if (count_words<int32_t>(gpu->slots, sizeof gpu->slots, creator) != 0) bits |= kCreator;
    return bits;
  });
  EXPECT_EQ(found & kNoAttach, 0) << "Mallory's attach failed";
  EXPECT_EQ(found & kNoOwnGrant, 0) << "Mallory's own grant is not in the page";
  EXPECT_EQ(found & kJobId, 0) << "the neighbour's job id is in the page";
  EXPECT_EQ(found & kUid, 0) << "the neighbour's uid is in the page";
  EXPECT_EQ(found & kCreator, 0) << "the pid whose end ends the neighbour is in the page";
  EXPECT_GE(found, 0) << "Mallory's process crashed";

  // The record a restart takes the instances over from is root's alone.
  struct stat st {};
  ASSERT_EQ(::stat((agent.dir() + "/run/gpu0.records").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ::geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  auto status = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(status);
  EXPECT_NE(status->text.find("\"job\":" + std::to_string(kNeighbourJob)), std::string::npos)
      << status->text;
}

}  // namespace
}  // namespace egpu::test
