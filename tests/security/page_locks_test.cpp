// A job holds its own page's inode lock (a write() whose page fault nobody
// answers: a FUSE file of its own, userfaultfd here) while the agent has to
// change the page: trim it, remove it, repair it after a restart. The
// agent's thread must never wait on it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/protocol/control_client.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/unique_fd.h"
#include "nodeagent/page_chores.h"
#include "tests/agent/agent_fixture.h"
#include "tests/security/agent_checks.h"
#include "tests/security/tenants.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;

uint64_t length_of(int fd) {
  struct stat st {};
  return fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

class PageLocks : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }
  AgentProcess agent;
};

// Holds the inode lock of a file for as long as it lives: a write() into
// the file from a buffer whose page fault nobody answers (userfaultfd here;
// a job does it with a FUSE file whose daemon never answers a read).
class HeldInodeLock {
 public:
  HeldInodeLock(int file, off_t offset) {
    uffd_ = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
    if (uffd_ < 0) return;
    uffdio_api api{};
    api.api = UFFD_API;
    if (ioctl(uffd_, UFFDIO_API, &api) != 0) return;
    buffer_ = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffer_ == MAP_FAILED) return;
    uffdio_register reg{};
    reg.range = {reinterpret_cast<uint64_t>(buffer_), 4096};
    reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    if (ioctl(uffd_, UFFDIO_REGISTER, &reg) != 0) return;
    writer_ = std::thread([this, file, offset] { (void)!pwrite(file, buffer_, 4096, offset); });
    // The fault's message: the writer is inside write(), the lock held (a
    // minute at most: a write that never faults holds nothing).
    pollfd p{uffd_, POLLIN, 0};
    uffd_msg msg{};
    held_ = poll(&p, 1, 60'000) == 1 && read(uffd_, &msg, sizeof msg) == sizeof msg &&
            msg.event == UFFD_EVENT_PAGEFAULT;
  }
  ~HeldInodeLock() {
    if (uffd_ >= 0) close(uffd_);  // the fault is then served as usual: the write ends
    if (writer_.joinable()) writer_.join();
    if (buffer_ != nullptr && buffer_ != MAP_FAILED) munmap(buffer_, 4096);
  }
  bool held() const { return held_; }

 private:
  int uffd_ = -1;
  void* buffer_ = nullptr;
  std::thread writer_;
  bool held_ = false;
};

uint64_t page_chores_pending(const AgentProcess& agent) {
  auto st = agent.call(protocol::StatusRequest{0, 0});
  if (!st) return 0;
  return nlohmann::json::parse(st->text)["agent"]["page_chores_pending"].get<uint64_t>();
}

// A job holds its page's inode lock while its page has grown, then its step
// ends: the agent's truncation and unlink wait for the lock on chore
// workers, and the agent serves on (it stopped dead before: heartbeat gone
// for every job on the node, signals ignored).
TEST_F(PageLocks, AJobHoldingItsPagesLockDoesNotStopTheAgent) {
  if (geteuid() != 0) GTEST_SKIP() << "holds a lock through userfaultfd in write(): needs root";
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(kMalloryJob, 50, kMallory));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  ASSERT_EQ(agent.call(create_request(kHonestJob, 50, kHonest))->status, ReplyStatus::kOk);
  const std::string dir =
      agent.dir() + "/run/instance-" + std::to_string(created->instance_id) + ".d";
  const std::string path = dir + "/page";
  UniqueFd page(open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(page.valid()) << path << ": " << std::strerror(errno);
  {
    // Grown, then held: a look between the two may take the growth back
    // before the lock is held; then again.
    std::unique_ptr<HeldInodeLock> lock;
    for (int attempt = 0; attempt < 20; ++attempt) {
      lock.reset();
      ASSERT_EQ(ftruncate(page.get(), 64 << 20), 0);
      lock = std::make_unique<HeldInodeLock>(page.get(), 32 << 20);
      if (!lock->held()) GTEST_SKIP() << "userfaultfd cannot hold a write here";
      if (length_of(page.get()) == uint64_t{64} << 20) break;
    }
    ASSERT_EQ(length_of(page.get()), uint64_t{64} << 20) << "never grown and held at once";
    // The next look (within a second) starts taking the growth back, which
    // waits for the lock; the status says so, so the agent still answers.
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (page_chores_pending(agent) == 0) {
      ASSERT_LT(std::chrono::steady_clock::now(), until) << "no chore waits for the lock";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // The step ends: its page's name waits for the lock too.
    auto removed = agent.call(protocol::RemoveRequest{kMalloryJob, protocol::kAllSteps, 0});
    ASSERT_TRUE(removed) << removed.error();
    EXPECT_EQ(removed->status, ReplyStatus::kOk) << removed->text;
    auto st = agent.call(protocol::StatusRequest{0, 0});
    ASSERT_TRUE(st) << "the agent does not answer status: " << st.error();
    EXPECT_TRUE(heartbeat_advances(agent)) << "the agent's ticks stopped";
    EXPECT_EQ(run_as(kHonest,
                     [&] {
                       auto att = attach(agent.socket(), kHonestJob, 0, 0);
                       return att && att->reply.status == ReplyStatus::kOk ? 0 : 1;
                     }),
              0);
    // A new step's page goes into RuntimeDir, whose lock no waiting chore holds.
    auto next = agent.call(create_request(3, 50, kHonest));
    ASSERT_TRUE(next) << next.error();
    EXPECT_EQ(next->status, ReplyStatus::kOk) << next->text;
  }
  // The lock is let go: the chores end, the page and its name are gone.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (page_chores_pending(agent) != 0 || access(path.c_str(), F_OK) == 0 ||
         access(dir.c_str(), F_OK) == 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the chores never ended";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// A user's jobs hold the locks of two pages, whose removals then wait on
// its two chore workers; every later step it ends queues one more chore,
// each holding a descriptor. Past the bound its new steps are refused (its
// neighbours' are not), until the locks are let go.
TEST_F(PageLocks, AUserWhoseJobsHoldTheirPagesLocksGetsNoNewStepsPastABacklog) {
  if (geteuid() != 0) GTEST_SKIP() << "holds a lock through userfaultfd in write(): needs root";
  ASSERT_TRUE(agent.start()) << agent.log();
  std::vector<UniqueFd> pages;
  std::vector<std::unique_ptr<HeldInodeLock>> locks;
  for (uint64_t job : {uint64_t{10}, uint64_t{11}}) {
    auto created = agent.call(create_request(job, 10, kMallory));
    ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
    const std::string path =
        agent.dir() + "/run/instance-" + std::to_string(created->instance_id) + ".d/page";
    pages.emplace_back(open(path.c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(pages.back().valid()) << path;
    locks.push_back(std::make_unique<HeldInodeLock>(pages.back().get(), 0));
    if (!locks.back()->held()) GTEST_SKIP() << "userfaultfd cannot hold a write here";
    ASSERT_EQ(agent.call(protocol::RemoveRequest{job, protocol::kAllSteps, 0})->status,
              ReplyStatus::kOk);
  }
  // A job that truncates each fresh page the agent makes it leaves one set
  // aside each time, with a chore to remove it: no more past the backlog.
  auto truncating = agent.call(create_request(kMalloryJob, 10, kMallory));
  ASSERT_TRUE(truncating) << truncating.error();
  const std::string truncated =
      agent.dir() + "/run/instance-" + std::to_string(truncating->instance_id) + ".d/page";
  ASSERT_EQ(truncating->status, ReplyStatus::kOk) << truncating->text;
  int replaced = 0;
  for (int i = 0; i < 2 * static_cast<int>(agent::PageChores::kMaxBacklogPerUser); ++i) {
    UniqueFd fd(open(truncated.c_str(), O_RDWR | O_CLOEXEC));
    if (!fd.valid() || ftruncate(fd.get(), 4096) != 0) break;
    // An attach looks at the page's length: the first one after the
    // truncation replaces it (if no tick did) while the backlog allows;
    // past it, nothing does, and the loop ends. A second look tries again
    // where making the fresh page failed.
    struct stat was {};
    struct stat now {};
    fstat(fd.get(), &was);
    for (int look = 0; look < 2; ++look) {
      (void)run_as(kMallory, [&] {
        auto att = attach(agent.socket(), kMalloryJob, 0, 0);
        return att && att->reply.status == ReplyStatus::kOk ? 0 : 1;
      });
      if (stat(truncated.c_str(), &now) != 0 || now.st_ino != was.st_ino) break;
    }
    if (now.st_ino == was.st_ino) break;
    ++replaced;
  }
  EXPECT_GE(replaced, 2) << "the truncated page was never replaced: the test proves nothing";
  size_t set_aside = 0;
  for (const auto& entry : std::filesystem::directory_iterator(agent.dir() + "/run"))
    set_aside += entry.path().filename().string().starts_with("gone-") ? 1 : 0;
  EXPECT_LE(set_aside, agent::PageChores::kMaxBacklogPerUser)
      << "set aside without bound (" << replaced << " replacements)";
  uint64_t job = 100;
  Result<protocol::Reply> refused = Error{"never refused"};
  for (; job < 100 + 2 * agent::PageChores::kMaxBacklogPerUser; ++job) {
    auto created = agent.call(create_request(job, 10, kMallory));
    ASSERT_TRUE(created) << created.error();
    if (created->status != ReplyStatus::kOk) {
      refused = std::move(created);
      break;
    }
    ASSERT_EQ(agent.call(protocol::RemoveRequest{job, protocol::kAllSteps, 0})->status,
              ReplyStatus::kOk);
  }
  ASSERT_TRUE(refused) << refused.error();
  EXPECT_EQ(refused->status, ReplyStatus::kFull);
  EXPECT_NE(refused->text.find("page chores waiting"), std::string::npos) << refused->text;
  // Its two stuck chores, the set-asides and one per step since.
  EXPECT_LE(job - 100, agent::PageChores::kMaxBacklogPerUser - 2) << "refused past the backlog";
  EXPECT_EQ(agent.call(create_request(kHonestJob, 50, kHonest))->status, ReplyStatus::kOk);
  locks.clear();  // the locks are let go: the chores finish, and its steps start again
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (page_chores_pending(agent) != 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the chores never ended";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto again = agent.call(create_request(job, 10, kMallory));
  EXPECT_EQ(again->status, ReplyStatus::kOk) << again->text;
}

// What a job does to its page before it holds the page's lock across an
// agent's restart: what a restarted agent used to repair in place on its
// only thread (chmod, chown, an unlink to replace it), each waiting on that
// lock before the agent ever served.
struct PageChange {
  const char* name;
  bool (*apply)(int page);
  bool replaced;  // a fresh page (another size), or the same page kept
};

void PrintTo(const PageChange& change, std::ostream* out) {
  *out << change.name;
}

class PageHeldAcrossARestart : public PageLocks,
                               public ::testing::WithParamInterface<PageChange> {};

TEST_P(PageHeldAcrossARestart, TheRestartedAgentServes) {
  if (geteuid() != 0) GTEST_SKIP() << "holds a lock through userfaultfd in write(): needs root";
  ASSERT_TRUE(agent.start()) << agent.log();
  auto created = agent.call(create_request(kMalloryJob, 50, kMallory));
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  const std::string path =
      agent.dir() + "/run/instance-" + std::to_string(created->instance_id) + ".d/page";
  agent.kill_hard();
  UniqueFd page(open(path.c_str(), O_RDWR | O_CLOEXEC));
  ASSERT_TRUE(page.valid()) << path << ": " << std::strerror(errno);
  struct stat before {};
  ASSERT_EQ(fstat(page.get(), &before), 0);
  ASSERT_TRUE(GetParam().apply(page.get())) << std::strerror(errno);
  {
    HeldInodeLock lock(page.get(), 0);  // within the page: its length stays
    if (!lock.held()) GTEST_SKIP() << "userfaultfd cannot hold a write here";
    ASSERT_TRUE(agent.start()) << "the restarted agent never served:\n" << agent.log();
    auto shown = agent.call(protocol::ShowRequest{created->instance_id});
    ASSERT_TRUE(shown) << shown.error();
    EXPECT_EQ(shown->status, ReplyStatus::kOk) << shown->text;
    struct stat now {};
    ASSERT_EQ(stat(path.c_str(), &now), 0);
    EXPECT_EQ(now.st_ino != before.st_ino, GetParam().replaced);
    EXPECT_EQ(now.st_uid, kMallory);
    EXPECT_TRUE(heartbeat_advances(agent)) << "the agent's ticks stopped";
    auto next = agent.call(create_request(kHonestJob, 50, kHonest));
    ASSERT_TRUE(next) << next.error();
    EXPECT_EQ(next->status, ReplyStatus::kOk) << next->text;
  }
  // The lock is let go: a page set aside goes with its chore.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (page_chores_pending(agent) != 0) {
    ASSERT_LT(std::chrono::steady_clock::now(), until) << "the chores never ended";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Changes, PageHeldAcrossARestart,
    ::testing::Values(PageChange{"Mode", [](int fd) { return fchmod(fd, 0644) == 0; }, false},
                      PageChange{"Group", [](int fd) { return fchown(fd, -1, 0) == 0; }, false},
                      PageChange{"Size", [](int fd) { return ftruncate(fd, 8192) == 0; }, true}),
    [](const ::testing::TestParamInfo<PageChange>& change) {
      return std::string(change.param.name);
    });

}  // namespace
}  // namespace egpu::test
