// The in-flight bound the agent publishes in the GPU page follows who has
// processes on the GPU: deep for a lone burst job, the shared bound as soon
// as a second job attaches or the lone one is capped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/shm/pages.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
constexpr uid_t kOwner = 4242;
constexpr int64_t kShared = 2'000'000;  // InflightUs=2000 (the default)
constexpr int64_t kAlone = 20'000'000;  // InflightAloneUs=20000 (the default)

class PublishedBound {
 public:
  explicit PublishedBound(const AgentProcess& agent) {
    const int fd = open((agent.dir() + "/run/gpu0").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    void* m = mmap(nullptr, sizeof(shm::GpuPage), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (m != MAP_FAILED) page_ = static_cast<const shm::GpuPage*>(m);
  }
  ~PublishedBound() {
    if (page_ != nullptr) munmap(const_cast<shm::GpuPage*>(page_), sizeof(shm::GpuPage));
  }
  bool ok() const { return page_ != nullptr; }
  int64_t now() const { return page_->inflight_limit_ns.load(); }
  // Waits up to 30 s for `want` (a reclaim follows the process's exit).
  int64_t becomes(int64_t want) const {
    for (int i = 0; i < 3000 && now() != want; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return now();
  }

 private:
  const shm::GpuPage* page_ = nullptr;
};

TEST(AgentInflightBound, DeepForALoneBurstJobSharedWithTwoOrACap) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto a = agent.call(create_request(1, 50, kOwner));
  ASSERT_EQ(a->status, ReplyStatus::kOk) << a->text;
  ASSERT_EQ(agent.call(create_request(2, 50, kOwner))->status, ReplyStatus::kOk);
  PublishedBound bound(agent);
  ASSERT_TRUE(bound.ok());

  const pid_t first = attached_process(agent.socket(), 1, kOwner);
  ASSERT_GT(first, 0) << agent.log();
  EXPECT_EQ(bound.now(), kAlone);
  // A second job's process: the shared bound before its attach returns.
  const pid_t second = attached_process(agent.socket(), 2, kOwner);
  ASSERT_GT(second, 0) << agent.log();
  EXPECT_EQ(bound.now(), kShared);
  // It dies: alone again once it is reclaimed.
  kill(second, SIGKILL);
  waitpid(second, nullptr, 0);
  EXPECT_EQ(bound.becomes(kAlone), kAlone);
  // Capped, the lone job's queue must not run on past its cap.
  auto capped =
      agent.call(protocol::ResizeRequest{a->instance_id, 0, mode_value(Mode::kCap), 0, 0});
  ASSERT_EQ(capped->status, ReplyStatus::kOk) << capped->text;
  EXPECT_EQ(bound.now(), kShared);
  kill(first, SIGKILL);
  waitpid(first, nullptr, 0);
  if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
}

}  // namespace
}  // namespace egpu::test
