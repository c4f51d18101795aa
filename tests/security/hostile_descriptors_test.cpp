// Issue 10, findings 1 and 2: a job user does to the descriptors it got at
// attach what any process may do to its own descriptors (clear their flags,
// flood them, truncate the files behind them), beside another user's honest
// job. The agent must stay up, keep answering and keep every instance.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "core/protocol/control_client.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "tests/agent/agent_fixture.h"
#include "tests/agent/lingering_socket.h"
#include "tests/security/agent_checks.h"
#include "tests/security/tenants.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;

// The agent answers root's status (within 15 s: for a stalled agent, not a
// measure of a busy host), still knows both jobs, and its GPU page's
// heartbeat advances.
void expect_serving(const AgentProcess& agent) {
  auto c = protocol::ControlClient::connect(agent.socket(), 15000);
  ASSERT_TRUE(c) << "the agent does not accept connections: " << c.error();
  auto st = c->call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st) << "the agent does not answer status: " << st.error();
  const auto j = nlohmann::json::parse(st->text);
  std::set<uint64_t> jobs;
  for (const auto& inst : j["gpus"][0]["instances"])
    jobs.insert(inst.at("job").get<uint64_t>());
  EXPECT_TRUE(jobs.contains(kMalloryJob)) << st->text;
  EXPECT_TRUE(jobs.contains(kHonestJob)) << st->text;
  EXPECT_TRUE(heartbeat_advances(agent));
  int status = 0;
  EXPECT_EQ(waitpid(agent.pid(), &status, WNOHANG), 0) << "the agent exited";
}

// What Mallory's process holds once attached: the reply (its descriptors
// open) and its instance page, mapped writable as a shim maps it.
struct AttachedPage {
  RawReply att;
  shm::Mapping page;
};
std::optional<AttachedPage> attach_and_map_page(const std::string& socket) {
  auto att = attach(socket, kMalloryJob, 0, 0);
  if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return std::nullopt;
  auto page =
      shm::map_fd(att->fds[kInstancePageFd], sizeof(shm::InstancePage), shm::Access::kReadWrite);
  if (!page) return std::nullopt;
  return AttachedPage{std::move(*att), std::move(*page)};
}

class HostileDescriptors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(agent.start()) << agent.log();
    ASSERT_EQ(agent.call(create_request(kMalloryJob, 50, kMallory))->status, ReplyStatus::kOk);
    auto honest = agent.call(create_request(kHonestJob, 50, kHonest));
    ASSERT_EQ(honest->status, ReplyStatus::kOk);
    honest_instance = honest->instance_id;
  }
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }

  void expect_agent_serving() { expect_serving(agent); }

  // The honest user's process can attach and gets usable pages.
  void expect_honest_attach() {
    const int rc = run_as(kHonest, [&] {
      auto att = attach(agent.socket(), kHonestJob, 0, 0);
      if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
      auto page = shm::map_fd(att->fds[kInstancePageFd], sizeof(shm::InstancePage),
                              shm::Access::kReadWrite);
      return page && page->as<shm::InstancePage>()->magic == shm::kInstancePageMagic ? 0 : 2;
    });
    EXPECT_EQ(rc, 0);
  }

  AgentProcess agent;
  uint64_t honest_instance = 0;
};

// Finding 1: the wake descriptor was the agent's own eventfd; clearing
// O_NONBLOCK on it made the agent's drain loop block forever.
TEST_F(HostileDescriptors, ClearingTheFlagsOfEveryDescriptorDoesNotHangTheAgent) {
  const int rc = run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    for (int fd : att->fds)
      (void)fcntl(fd, F_SETFL, 0);
    // Ask the agent to decide, as a shim does when it starts to wait.
    const uint64_t one = 1;
    for (int i = 0; i < 3; ++i) {
      if (write(att->fds[kWakeFd], &one, sizeof one) != sizeof one) return 3;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return 0;
  });
  ASSERT_EQ(rc, 0);
  expect_agent_serving();
  expect_honest_attach();
}

// Descriptors passed to the agent: a TCP socket set to linger an hour on
// data its peer never reads blocks its last close. The agent held that last
// close when it received without room for descriptors (the kernel drops
// them in the receiver) or closed a connection with such a message queued;
// its only thread then hung, and every shim on the node took it for dead.
// Passed on the control socket (twice, so the second is still queued when
// the agent closes the connection) and on the wake channel. Where the
// kernel refuses such senders (SO_PASSRIGHTS) they get EPERM.
void pass_lingering_sockets(AgentProcess& agent, bool* sent_any) {
  int ready[2];
  int hold[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(hold), 0);
  const pid_t mallory = fork();
  if (mallory == 0) {
    setpgid(0, 0);  // her senders with her, should she be killed
    close(ready[0]);
    close(hold[1]);
    if (!become(kMallory)) _exit(99);
    std::vector<LingeringSocket> held;
    char verdict = 'r';  // every send refused with EPERM
    char sent = '0';     // how many went through
    // Back to back: the agent may close the connection over the first.
    auto pass = [&](int via, int count) {
      std::vector<UniqueFd> sockets;
      for (int i = 0; i < count; ++i) {
        held.push_back(lingering_socket());
        if (!held.back().socket.valid()) {
          verdict = 'n';
          return;
        }
        sockets.push_back(std::move(held.back().socket));
      }
      // When sent, the agent's copies are the last; refused, the sending
      // child's exit closes them without lingering.
      const SendOutcome out = send_last_copies(via, std::move(sockets));
      sent = static_cast<char>(sent + out.sent);
      if (out.sent > 0 && verdict != 'n') verdict = 'y';
      // EPERM: refused by the kernel; EPIPE: the agent already closed
      // the connection over the first one.
      if (out.error != 0 && out.error != EPERM && out.error != EPIPE && out.error != ECONNRESET)
        verdict = 'n';
    };
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->fds.size() < 3) _exit(1);
    UniqueFd control(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, agent.socket().c_str(), sizeof addr.sun_path - 1);
    if (::connect(control.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(2);
    pass(control.get(), 2);
    pass(att->fds[kWakeFd], 1);
    const char report[2] = {verdict, sent};
    (void)!write(ready[1], report, 2);
    char byte;
    (void)!read(hold[0], &byte, 1);  // the peers stay open, so the closes would block
    _exit(0);
  }
  close(ready[1]);
  close(hold[0]);
  char report[2] = {0, '0'};
  if (!readable_within(ready[0], std::chrono::seconds(120))) {
    kill(-mallory, SIGKILL);
    waitpid(mallory, nullptr, 0);
    close(ready[0]);
    close(hold[1]);
    FAIL() << "mallory never reported: " << agent.log();
  }
  EXPECT_EQ(read(ready[0], report, 2), 2);
  const char verdict = report[0];
  const int sent = report[1] - '0';
  EXPECT_TRUE(verdict == 'y' || verdict == 'r') << "the descriptors could not be sent";
  *sent_any = verdict == 'y';
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  expect_serving(agent);
  // The connection that passed them left the agent for a disposal process
  // (the wake channel's end goes when its instance does); none is held.
  size_t handed = 0;
  size_t held = 0;
  // The deadline only ends a failing case.
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < until;) {
    auto st = agent.call(protocol::StatusRequest{0, 0});
    ASSERT_TRUE(st.ok());
    const auto p = nlohmann::json::parse(st->text)["agent"]["passed_descriptors"];
    handed = p["sockets_handed_on"].get<size_t>();
    held = p["sockets_held"].get<size_t>();
    if (handed >= (sent > 0 ? 1u : 0u)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_GE(handed, sent > 0 ? 1u : 0u);
  EXPECT_EQ(held, 0u) << "a socket that holds what was passed is still open in the agent";
  close(hold[1]);
  close(ready[0]);
  waitpid(mallory, nullptr, 0);
}

TEST_F(HostileDescriptors, APassedLingeringSocketDoesNotHangTheAgent) {
  bool sent = false;
  pass_lingering_sockets(agent, &sent);
  expect_honest_attach();
}

// The same on a kernel without SO_PASSRIGHTS (before 6.16): the agent
// receives them and must dispose of them without blocking.
TEST_F(HostileDescriptors, APassedLingeringSocketDoesNotHangTheAgentOnAnOlderKernel) {
  agent.kill_hard();
  agent.set_env("LD_PRELOAD", EGPU_OLD_KERNEL_FIXTURE);
  ASSERT_TRUE(agent.start()) << agent.log();
  bool sent = false;
  pass_lingering_sockets(agent, &sent);
  EXPECT_TRUE(sent) << "the agent refused them: the fixture did not take";
  expect_honest_attach();
}

// A user who floods its wake descriptor gets the agent's attention, not its
// whole time: status and attaches are still served.
TEST_F(HostileDescriptors, FloodingTheWakeDescriptorDoesNotStopTheAgent) {
  // Mallory herself, not a child of run_as: killing her must end the flood
  // (an orphaned flooder once spun on beside the tests that came next).
  const pid_t flooder = fork();
  if (flooder == 0) {
    if (!become(kMallory)) _exit(99);
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->fds.size() < 3) _exit(1);
    (void)fcntl(att->fds[kWakeFd], F_SETFL, 0);
    const uint64_t one = 1;
    // Until killed (the bound only keeps a lost flooder from running on).
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(300);
    while (std::chrono::steady_clock::now() < end &&
           write(att->fds[kWakeFd], &one, sizeof one) == sizeof one) {
    }
    _exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  expect_agent_serving();
  expect_honest_attach();
  kill(flooder, SIGKILL);
  waitpid(flooder, nullptr, 0);
}

// Finding 2: the instance page is the user's file; truncating it made the
// agent's next access to its mapping SIGBUS.
TEST_F(HostileDescriptors, TruncatingTheInstancePageDoesNotCrashTheAgent) {
  const int rc = run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    int truncated = 0;  // the page at least; the others are not files
    for (int fd : att->fds)
      truncated += ftruncate(fd, 0) == 0 ? 1 : 0;
    if (truncated == 0) return 2;
    // Whatever it truncated, make sure the agent looks at its pages now.
    const uint64_t one = 1;
    (void)!write(att->fds[kWakeFd], &one, sizeof one);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    return 0;
  });
  ASSERT_EQ(rc, 0);
  // A resize makes the agent scan every page of the GPU.
  auto resized =
      agent.call(protocol::ResizeRequest{honest_instance, 50, protocol::kModeUnchanged, 0, 0});
  ASSERT_TRUE(resized) << resized.error();
  expect_agent_serving();
  expect_honest_attach();
  // The truncating user's job is not dropped: it can attach again, and
  // gets a fresh page once the broken one's name is gone (on a chore worker;
  // each attach looks again, and the deadline only ends a failing case).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  bool replaced = false;
  while (!replaced && std::chrono::steady_clock::now() < until) {
    ASSERT_EQ(run_as(kMallory,
                     [&] {
                       auto att = attach(agent.socket(), kMalloryJob, 0, 0);
                       return att && att->reply.status == ReplyStatus::kOk ? 0 : 1;
                     }),
              0);
    replaced = agent.log().find("truncated its page; the page was replaced") != std::string::npos;
    if (!replaced) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(replaced) << agent.log();
}

// A job cuts each fresh page the agent gives it at once, at every attach:
// each replacement is some twenty system calls on the agent's only thread,
// so it gets four at once and one a second, however fast it attaches.
TEST_F(HostileDescriptors, CuttingEveryFreshPageGetsAFewReplacementsASecond) {
  const int rc = run_as(kMallory, [&] {
    // A fresh page is made while the one it replaces still exists: a new
    // inode each time.
    ino_t last = 0;
    size_t replacements = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 40; ++i) {
      auto att = attach(agent.socket(), kMalloryJob, 0, 0);
      if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
      struct stat st {};
      if (fstat(att->fds[kInstancePageFd], &st) != 0) return 1;
      replacements += i > 0 && st.st_ino != last ? 1 : 0;
      last = st.st_ino;
      if (ftruncate(att->fds[kInstancePageFd], 0) != 0) return 1;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::fprintf(stderr, "%zu replacements in %.2f s of 40 cut pages\n", replacements, seconds);
    return replacements >= 1 && static_cast<double>(replacements) <= 4 + seconds + 1 ? 0 : 2;
  });
  EXPECT_EQ(rc, 0) << "1: attach failed; 2: no replacement, or more than 4 + 1/s";
  expect_agent_serving();
  expect_honest_attach();
}

// Mallory's process attaches, `forge` writes into her page (given the slot
// the agent gave the process) and the process exits: once the agent has reclaimed
// that slot, her instance has no process left and asks for nothing.
void expect_no_process_left(const AgentProcess& agent,
                            const std::function<void(shm::InstancePage&, uint32_t)>& forge,
                            const char* what) {
  ASSERT_EQ(run_as(kMallory,
                   [&] {
                     auto own = attach_and_map_page(agent.socket());
                     if (!own) return 1;
                     forge(*own->page.as<shm::InstancePage>(), own->att.reply.proc_slot);
                     return 0;
                   }),
            0);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  nlohmann::json mallory = nlohmann::json::object();
  while (mallory.value("processes", -1) != 0 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto c = protocol::ControlClient::connect(agent.socket(), 30'000);  // for a hung agent
    ASSERT_TRUE(c) << c.error();
    auto st = c->call(protocol::StatusRequest{0, 0});
    ASSERT_TRUE(st) << st.error();
    const auto status = nlohmann::json::parse(st->text);
    for (const auto& inst : status["gpus"][0]["instances"])
      if (inst.at("job").get<uint64_t>() == kMalloryJob) mallory = inst;
  }
  EXPECT_EQ(mallory.value("processes", -1), 0)
      << what << " still counts as a process: " << mallory.dump();
  EXPECT_FALSE(mallory.value("asking", true)) << mallory.dump();
}

// A job writes a pid into a process slot the agent never gave out, claims a
// blocked thread and a second of queued work there, and exits. The agent
// counts only the slots it handed out: the forged one is no process, asks
// for nothing and holds no share of the honest job's GPU time.
TEST_F(HostileDescriptors, AForgedProcessSlotIsNotAProcess) {
  expect_no_process_left(
      agent,
      [](shm::InstancePage& page, uint32_t own) {
        auto& slot = page.procs[own == 7 ? 8 : 7];
        slot.busy.store(1);
        slot.inflight_ns.store(1'000'000'000);
        slot.pid.store(getpid());
      },
      "the forged slot");
  expect_agent_serving();
}

// A process rewrites the pid in the slot the agent gave it, then exits.
// The agent reclaims the slot it gave that process, whatever the page now
// says: it checked the page's pid first, so the slot stayed taken, and a
// process that was gone counted and held the GPU for as long as the job ran.
TEST_F(HostileDescriptors, ASlotWhosePidWasRewrittenIsReclaimedWithItsProcess) {
  expect_no_process_left(
      agent,
      [](shm::InstancePage& page, uint32_t own) {
        page.procs[own].busy.store(1);
        page.procs[own].pid.store(getppid());
      },
      "the rewritten slot");
  expect_agent_serving();
}

// A job writes a pid of its own into a slot the agent never gave out, and
// that process then attaches: the agent hands it that slot, and must look
// at it from then on. It did not (it read only the slots it gave out), so
// the process ran unseen: its device time uncharged, never counted.
TEST_F(HostileDescriptors, AProcessAttachingToAForgedSlotIsLookedAt) {
  const int rc = run_as(kMallory, [&] {
    auto own = attach_and_map_page(agent.socket());
    if (!own) return 1;
    int go[2], slot[2];
    if (pipe(go) != 0 || pipe(slot) != 0) return 1;
    const pid_t second = fork();
    if (second == 0) {
      char byte;
      if (read(go[0], &byte, 1) != 1) _exit(1);
      auto mine = attach(agent.socket(), kMalloryJob, 0, 0);
      const uint32_t got =
          mine && mine->reply.status == ReplyStatus::kOk ? mine->reply.proc_slot : UINT32_MAX;
      if (write(slot[1], &got, sizeof got) != sizeof got) _exit(1);
      pause();
      _exit(0);
    }
    const uint32_t forged = own->att.reply.proc_slot == 7 ? 8 : 7;
    own->page.as<shm::InstancePage>()->procs[forged].pid.store(second);
    uint32_t got = UINT32_MAX;
    const bool told = write(go[1], "x", 1) == 1 && read(slot[0], &got, sizeof got) == sizeof got;
    int result = !told || got != forged ? 2 : 3;
    if (result == 3) {
      auto c = protocol::ControlClient::connect(agent.socket(), 30'000);  // for a hung agent
      if (c) {
        auto st = c->call(protocol::StatusRequest{0, 0});
        const auto j = st ? nlohmann::json::parse(st->text) : nlohmann::json::object();
        for (const auto& inst : j["gpus"][0]["instances"]) {
          const bool mine = inst.at("job").template get<uint64_t>() == kMalloryJob;
          if (mine && inst.value("processes", -1) == 2) result = 0;
        }
      }
    }
    kill(second, SIGKILL);
    waitpid(second, nullptr, 0);
    return result;
  });
  EXPECT_EQ(rc, 0) << "2: the attach did not get the forged slot; 3: its process is not counted";
  expect_agent_serving();
}

// A job writes pids into every process slot the agent did not give out, so
// that its later processes are refused for want of a slot (and run outside
// the agent's pacing, under a fail mode their own environment sets). The
// slots the agent did not give out are free whatever the job wrote there.
TEST_F(HostileDescriptors, ForgedSlotsDoNotFillAnInstance) {
  const int rc = run_as(kMallory, [&] {
    auto own = attach_and_map_page(agent.socket());
    if (!own) return 1;
    auto* page = own->page.as<shm::InstancePage>();
    for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
      if (i != own->att.reply.proc_slot) page->procs[i].pid.store(1);
    }
    const pid_t second = fork();
    if (second == 0) {
      auto mine = attach(agent.socket(), kMalloryJob, 0, 0);
      _exit(!mine ? 3 : mine->reply.status == ReplyStatus::kOk ? 0 : 2);
    }
    int status = 0;
    if (waitpid(second, &status, 0) != second || !WIFEXITED(status)) return 3;
    return WEXITSTATUS(status);
  });
  EXPECT_EQ(rc, 0) << "2: the second process was refused; 3: it could not ask";
  expect_agent_serving();
  expect_honest_attach();
}

// A restart of the agent after a truncation keeps the instance (its page is
// started afresh), instead of dropping it and freeing its units to others.
TEST_F(HostileDescriptors, ARestartAfterATruncationKeepsTheInstance) {
  const int rc = run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->fds.size() < 3) return 1;
    return ftruncate(att->fds[kInstancePageFd], 0) == 0 ? 0 : 2;
  });
  ASSERT_EQ(rc, 0) << "the instance page could not be truncated: nothing to test";
  agent.kill_hard();
  ASSERT_TRUE(agent.start()) << agent.log();
  expect_agent_serving();
  auto full = agent.call(create_request(5, 60, kHonest));
  EXPECT_EQ(full->status, ReplyStatus::kOverAllocation) << full->text;
}

// Its owner can take a lease on its instance page; a restarted agent's open
// of the page would then wait out the lease-break time (45 s) per page,
// with no agent on the node meanwhile. The agent replaces a leased page
// instead, and keeps the instance.
TEST_F(HostileDescriptors, ALeaseOnThePageDoesNotHoldUpARestart) {
  const std::string page = agent.dir() + "/run/instance-1.d/page";
  ASSERT_EQ(access(page.c_str(), F_OK), 0) << "Mallory's instance is not instance 1";
  struct stat leased {};
  ASSERT_EQ(stat(page.c_str(), &leased), 0);
  agent.kill_hard();  // a lease needs the file open for writing by nobody
  int ready[2];
  ASSERT_EQ(pipe2(ready, O_CLOEXEC), 0);
  const pid_t holder = fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    signal(SIGIO, SIG_IGN);  // the lease break is told, and ignored
    const int fd = setgid(kMallory) == 0 && setuid(kMallory) == 0
                       ? open(page.c_str(), O_RDONLY | O_CLOEXEC)
                       : -1;
    const char ok = fd >= 0 && fcntl(fd, F_SETLEASE, F_RDLCK) == 0 ? 'y' : 'n';
    (void)!write(ready[1], &ok, 1);
    for (;;)
      pause();
  }
  close(ready[1]);
  char ok = 0;
  ASSERT_EQ(read(ready[0], &ok, 1), 1);
  close(ready[0]);
  if (ok != 'y') {
    kill(holder, SIGKILL);
    waitpid(holder, nullptr, 0);
    FAIL() << "Mallory could not take a lease on her page: nothing to test";
  }
  const bool started = agent.start();
  // Replaced, not opened: an open would have waited out the lease break
  // (which start(), giving the agent a minute, would not have told).
  struct stat now {};
  const bool replaced = stat(page.c_str(), &now) == 0 && now.st_ino != leased.st_ino;
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  ASSERT_TRUE(started) << "the agent did not come back while a lease was held:\n" << agent.log();
  EXPECT_TRUE(replaced) << "the leased page was opened, not replaced:\n" << agent.log();
  expect_agent_serving();
  expect_honest_attach();
}

}  // namespace
}  // namespace egpu::test
