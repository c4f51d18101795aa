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

// A process of job `job` (step 0, GPU 0) attached as the owner, until killed.
pid_t attached_process(const std::string& socket, uint64_t job) {
  int ready[2];
  if (pipe(ready) != 0) return -1;
  const pid_t child = fork();
  if (child == 0) {
    char ok = 0;
    if (setresgid(kOwner, kOwner, kOwner) == 0 && setresuid(kOwner, kOwner, kOwner) == 0) {
      auto att = attach(socket, job, 0, 0);
      ok = att && att->reply.status == ReplyStatus::kOk ? 1 : 0;
    }
    (void)!write(ready[1], &ok, 1);
    pause();
    _exit(0);
  }
  char ok = 0;
  const bool replied = read(ready[0], &ok, 1) == 1;
  close(ready[0]);
  close(ready[1]);
  if (!replied || ok != 1) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    return -1;
  }
  return child;
}

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
  // Waits up to 2 s for `want` (a reclaim follows the process's exit).
  int64_t becomes(int64_t want) const {
    for (int i = 0; i < 200 && now() != want; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return now();
  }

 private:
  const shm::GpuPage* page_ = nullptr;
};

protocol::CreateRequest create_req(uint64_t job, uint32_t units) {
  protocol::CreateRequest r{};
  r.job_id = job;
  r.step_id = 0;
  r.gpu_index = 0;
  r.units = units;
  r.job_units = units;
  r.uid = kOwner;
  r.gid = kOwner;
  return r;
}

TEST(AgentInflightBound, DeepForALoneBurstJobSharedWithTwoOrACap) {
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto a = agent.call(create_req(1, 50));
  ASSERT_EQ(a->status, ReplyStatus::kOk) << a->text;
  ASSERT_EQ(agent.call(create_req(2, 50))->status, ReplyStatus::kOk);
  PublishedBound bound(agent);
  ASSERT_TRUE(bound.ok());

  const pid_t first = attached_process(agent.socket(), 1);
  ASSERT_GT(first, 0) << agent.log();
  EXPECT_EQ(bound.now(), kAlone);
  // A second job's process: the shared bound before its attach returns.
  const pid_t second = attached_process(agent.socket(), 2);
  ASSERT_GT(second, 0) << agent.log();
  EXPECT_EQ(bound.now(), kShared);
  // It dies: alone again once it is reclaimed.
  kill(second, SIGKILL);
  waitpid(second, nullptr, 0);
  EXPECT_EQ(bound.becomes(kAlone), kAlone);
  // Capped, the lone job's queue must not run on past its cap.
  auto capped = agent.call(
      protocol::ResizeRequest{a->instance_id, 0, static_cast<uint32_t>(protocol::Mode::kCap)});
  ASSERT_EQ(capped->status, ReplyStatus::kOk) << capped->text;
  EXPECT_EQ(bound.now(), kShared);
  kill(first, SIGKILL);
  waitpid(first, nullptr, 0);
  if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
}

}  // namespace
}  // namespace egpu::test
