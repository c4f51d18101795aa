// A job grows its own instance page (ftruncate, fallocate, also past the end
// with FALLOC_FL_KEEP_SIZE). The page is the job user's file on the agent's
// RuntimeDir filesystem, /run on a node without run-egpu.mount: growth there
// takes room from every other user of it, and from the next job's page.
// The agent takes the growth back, keeps the page's contents, and a create
// that found no room for its page finds it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/protocol/control_client.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "tests/agent/agent_fixture.h"
#include "tests/security/tenants.h"

namespace egpu::test {
namespace {

using protocol::ReplyStatus;
constexpr uint64_t kPageSize = sizeof(shm::InstancePage);

struct Extent {
  uint64_t length;
  uint64_t held;  // bytes of storage
};

Extent extent_of(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return {0, 0};
  return {static_cast<uint64_t>(st.st_size), static_cast<uint64_t>(st.st_blocks) * 512};
}

// What the agent leaves: the page's own length and no more than its pages.
bool taken_back(const Extent& e) {
  return e.length == kPageSize && e.held <= (kPageSize + 4095) / 4096 * 4096;
}

// Attaches as Mallory, grows her page with `grow`, and waits (up to 60 s)
// for the agent to take it back. 0: taken back with the page still hers
// and intact; 1-4: what went wrong.
int grow_and_wait(const AgentProcess& agent, const std::function<bool(int)>& grow) {
  return run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    const int fd = att->fds[kInstancePageFd];
    if (!grow(fd) || taken_back(extent_of(fd))) return 2;  // it must have grown
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!taken_back(extent_of(fd))) {
      if (std::chrono::steady_clock::now() > until) return 3;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto page = shm::map_fd(fd, kPageSize, shm::Access::kReadOnly);
    const auto* p = page ? page->as<const shm::InstancePage>() : nullptr;
    return p != nullptr && p->magic == shm::kInstancePageMagic && p->instance_id != 0 ? 0 : 4;
  });
}

class PageGrowth : public ::testing::Test {
 protected:
  void TearDown() override {
    if (HasFailure()) std::fprintf(stderr, "agent log:\n%s\n", agent.log().c_str());
  }
  AgentProcess agent;
};

TEST_F(PageGrowth, AGrownPageIsTakenBackWithItsContentsKept) {
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(kMalloryJob, 50, kMallory))->status, ReplyStatus::kOk);
  // Longer, with its blocks allocated.
  EXPECT_EQ(grow_and_wait(agent,
                          [](int fd) {
                            return ftruncate(fd, 256 << 20) == 0 &&
                                   fallocate(fd, 0, 0, 32 << 20) == 0;
                          }),
            0);
  // The same length, with blocks past its end.
  EXPECT_EQ(
      grow_and_wait(agent,
                    [](int fd) { return fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 32 << 20) == 0; }),
      0);
  EXPECT_NE(agent.log().find("its user grew its page by"), std::string::npos) << agent.log();
  // Nothing else happened to the instance: it answers status and attaches.
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st) << st.error();
  EXPECT_EQ(run_as(kMallory,
                   [&] {
                     auto att = attach(agent.socket(), kMalloryJob, 0, 0);
                     return att && att->reply.status == ReplyStatus::kOk ? 0 : 1;
                   }),
            0);
}

// A tmpfs for RuntimeDir, as run-egpu.mount makes one: small, so that a job
// can fill it. Detached at the end (the agent may still hold files there).
class SmallRuntimeFilesystem {
 public:
  explicit SmallRuntimeFilesystem(std::string dir) : dir_(std::move(dir)) {
    mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     "size=1m,mode=0755") == 0;
    if (!mounted_) error_ = std::strerror(errno);
  }
  ~SmallRuntimeFilesystem() {
    if (mounted_) umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }
  const std::string& error() const { return error_; }

 private:
  std::string dir_;
  bool mounted_ = false;
  std::string error_;
};

// No heartbeat look within the test (HeartbeatMs at its largest): the
// create itself must find the room the grown page took.
TEST(PageGrowthOnItsOwnFilesystem, ACreateFindsTheRoomAGrownPageTook) {
  if (geteuid() != 0) GTEST_SKIP() << "mounts a tmpfs and plays other uids: needs root";
  AgentProcess agent("HeartbeatMs=10000\nHeartbeatTimeoutMs=600000");
  SmallRuntimeFilesystem fs(agent.dir() + "/run");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << fs.error();
  ASSERT_TRUE(agent.start()) << agent.log();
  ASSERT_EQ(agent.call(create_request(kMalloryJob, 50, kMallory))->status, ReplyStatus::kOk);
  // Mallory fills what is left with her page.
  const int filled = run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    const int fd = att->fds[kInstancePageFd];
    off_t end = 8192;
    while (fallocate(fd, FALLOC_FL_KEEP_SIZE, end, 4096) == 0)
      end += 4096;
    return errno == ENOSPC ? 0 : 2;
  });
  ASSERT_EQ(filled, 0);
  auto reply = agent.call(create_request(kHonestJob, 50, kHonest));
  ASSERT_TRUE(reply) << reply.error();
  EXPECT_EQ(reply->status, ReplyStatus::kOk) << reply->text;
  EXPECT_NE(agent.log().find("its user grew its page by"), std::string::npos) << agent.log();
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st) << st.error();
  EXPECT_TRUE(nlohmann::json::parse(st->text)["agent"]["runtime_dir_own_filesystem"].get<bool>())
      << st->text;
}

TEST_F(PageGrowth, TheStatusSaysWhetherRuntimeDirHasItsOwnFilesystem) {
  ASSERT_TRUE(agent.start()) << agent.log();
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st) << st.error();
  // The test's RuntimeDir is a directory in /tmp.
  EXPECT_FALSE(nlohmann::json::parse(st->text)["agent"]["runtime_dir_own_filesystem"].get<bool>())
      << st->text;
  EXPECT_NE(agent.log().find("shares its filesystem with its parent"), std::string::npos)
      << agent.log();
}

}  // namespace
}  // namespace egpu::test
