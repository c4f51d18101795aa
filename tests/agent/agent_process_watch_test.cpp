// What an attach costs the agent is bound to the process that attached:
// - its slot is watched through the socket it came on, not a pid the
//   process could leave behind: a job user connects, hands the socket to a
//   child and exits, and by the time the child attaches another user's
//   process has the pid. The attach is refused, on a kernel with
//   SO_PEERPIDFD (Linux 6.5) and, through a preloaded fixture, without it;
// - the page says which slots are free, and it is the job's to write: a job
//   that frees its slots under live processes gets them again, and each
//   slot has one watch, so it cannot make the agent hold a descriptor per
//   attach.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/protocol/control_client.h"
#include "core/shm/pages.h"
#include "core/util/unique_fd.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {
namespace {

using namespace std::chrono_literals;
using protocol::ReplyStatus;
constexpr uid_t kOwner = 4242;
constexpr uid_t kOther = 4343;

// A process of `uid` that takes `pid` (clone3 with set_tid: root only) and
// sleeps until killed or its parent dies; -1 with errno set when the pid
// could not be had.
pid_t occupy_pid(pid_t pid, uid_t uid) {
  clone_args args{};
  args.exit_signal = SIGCHLD;
  args.set_tid = reinterpret_cast<uintptr_t>(&pid);
  args.set_tid_size = 1;
  const long r = ::syscall(SYS_clone3, &args, sizeof args);
  if (r == 0) {
    // Raw system calls only: glibc's view of this process is its parent's,
    // threads included, and its set*id() would signal threads it lacks.
    ::syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (::syscall(SYS_setgroups, 0, nullptr) != 0 || ::syscall(SYS_setresgid, uid, uid, uid) != 0 ||
        ::syscall(SYS_setresuid, uid, uid, uid) != 0) {
      ::syscall(SYS_exit_group, 1);
    }
    for (;;)
      ::syscall(SYS_ppoll, nullptr, 0, nullptr, nullptr, 0);
  }
  return static_cast<pid_t>(r);
}

// Kills and reaps a child however the test ends.
struct Reaped {
  pid_t pid = -1;
  ~Reaped() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

class ReusedPid : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (to switch users and to reuse a pid)";
    // A kernel before 6.5: no SO_PEERPIDFD, the agent watches by pid.
    if (GetParam()) agent.set_env("LD_PRELOAD", EGPU_OLD_KERNEL_FIXTURE);
    ASSERT_TRUE(agent.start()) << agent.log();
  }
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }
  AgentProcess agent;
};

TEST_P(ReusedPid, AnAttachFromAProcessWhosePidWasReusedIsRefused) {
  auto created = agent.call(create_request(1, 50, kOwner));
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  const uint64_t instance = created->instance_id;

  int go_fds[2];
  int result_fds[2];
  ASSERT_EQ(pipe2(go_fds, O_CLOEXEC), 0);
  ASSERT_EQ(pipe2(result_fds, O_CLOEXEC), 0);
  UniqueFd go_read(go_fds[0]), go(go_fds[1]), result(result_fds[0]), result_write(result_fds[1]);
  const pid_t connector = fork();
  ASSERT_GE(connector, 0);
  if (connector == 0) {
    go.reset();
    result.reset();
    if (!become(kOwner)) _exit(10);
    auto client = protocol::ControlClient::connect(agent.socket(), 5000);
    if (!client) _exit(11);
    const pid_t sender = fork();
    if (sender < 0) _exit(12);
    if (sender == 0) {
      // Attaches once told the connector's pid belongs to somebody else;
      // the test's end closing, or a minute passing, means give up.
      char c = 0;
      if (!readable_within(go_read.get(), 60s) || read(go_read.get(), &c, 1) != 1) _exit(13);
      auto r = client->call_with_fds(protocol::AttachRequest{1, 0, 0});
      const uint8_t status = r ? static_cast<uint8_t>(r->reply.status) : 255;
      (void)!write(result_write.get(), &status, 1);
      _exit(0);
    }
    _exit(0);  // the connecting process goes; its socket lives on in the sender
  }
  go_read.reset();
  result_write.reset();
  int wstatus = 0;
  ASSERT_EQ(waitpid(connector, &wstatus, 0), connector);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "connector: " << wstatus;

  Reaped reuser{occupy_pid(connector, kOther)};
  if (reuser.pid < 0) {
    const int err = errno;
    if (err == EEXIST) GTEST_SKIP() << "pid " << connector << " was taken before the test could";
    if (err == EPERM || err == ENOSYS || err == EINVAL) {
      GTEST_SKIP() << "clone3 with set_tid is not allowed here: " << std::strerror(err);
    }
    FAIL() << "clone3 with set_tid " << connector << ": " << std::strerror(err);
  }
  ASSERT_EQ(reuser.pid, connector);
  const char c = 1;
  ASSERT_EQ(write(go.get(), &c, 1), 1);
  ASSERT_TRUE(readable_within(result.get(), 60s)) << "the sender never reported";
  uint8_t status = 255;
  ASSERT_EQ(read(result.get(), &status, 1), 1);

  EXPECT_EQ(status, static_cast<uint8_t>(ReplyStatus::kDenied))
      << "the attach on a socket whose process is gone was answered " << int{status};
  auto shown = agent.call(protocol::ShowRequest{instance});
  ASSERT_TRUE(shown.ok());
  const auto j = nlohmann::json::parse(shown->text);
  EXPECT_EQ(j["processes"], 0) << "pid " << connector << " (now another user's process) holds a "
                               << "slot: " << j.dump();
  EXPECT_EQ(kill(reuser.pid, 0), 0) << "the pid's new owner must still be alive for the check";
}

size_t open_descriptors(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    ++n;
  }
  return n;
}

TEST(ProcessWatches, ProcessesThatFreeTheirOwnSlotsCostTheAgentOneDescriptorPerSlot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (to switch users)";
  AgentProcess agent;
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(1, 50, kOwner));
  ASSERT_TRUE(created.ok());
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  const size_t before = open_descriptors(agent.pid());

  // More live processes than an instance has slots, each of which attaches
  // and then marks its slot free in the job's page.
  constexpr int kProcesses = static_cast<int>(shm::kMaxProcsPerInstance) + 36;
  std::vector<Reaped> processes(kProcesses);
  for (int i = 0; i < kProcesses; ++i) {
    int ready_fds[2];
    ASSERT_EQ(pipe2(ready_fds, O_CLOEXEC), 0);
    UniqueFd ready(ready_fds[0]), ready_write(ready_fds[1]);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (!become(kOwner)) _exit(10);
      auto att = attach(agent.socket(), 1, 0, 0);
      if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() != 3) _exit(11);
      auto* page = static_cast<shm::InstancePage*>(mmap(
          nullptr, sizeof(shm::InstancePage), PROT_READ | PROT_WRITE, MAP_SHARED, att->fds[1], 0));
      if (page == MAP_FAILED) _exit(12);
      page->procs[att->reply.proc_slot].pid.store(0);
      for (int fd : att->fds)
        close(fd);
      const char c = 1;
      (void)!write(ready_write.get(), &c, 1);
      for (;;)
        pause();
    }
    processes[i].pid = pid;
    ready_write.reset();
    ASSERT_TRUE(readable_within(ready.get(), 60s)) << "process " << i << " never attached";
    char c = 0;
    ASSERT_EQ(read(ready.get(), &c, 1), 1) << "process " << i << " could not attach";
  }
  const size_t after = open_descriptors(agent.pid());
  EXPECT_LE(after, before + shm::kMaxProcsPerInstance)
      << kProcesses << " live processes of one instance cost the agent " << after - before
      << " descriptors";
}

std::string kernel_name(const ::testing::TestParamInfo<bool>& param) {
  return param.param ? "WithoutPeerPidfd" : "WithPeerPidfd";
}
INSTANTIATE_TEST_SUITE_P(Kernels, ReusedPid, ::testing::Bool(), kernel_name);

}  // namespace
}  // namespace egpu::test
