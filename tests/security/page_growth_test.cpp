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
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/protocol/control_client.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/unique_fd.h"
#include "tests/agent/agent_fixture.h"
#include "tests/security/agent_checks.h"
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

// Whether `fd`'s storage comes down to `at_most` bytes within 60 s (a bound
// for an agent that never takes it back, not a measure).
bool held_comes_down_to(int fd, uint64_t at_most) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (extent_of(fd).held > at_most) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// What the agent leaves: the page's own length, and its own storage (a
// huge page at most) of the 32 MiB grown.
bool taken_back(const Extent& e) {
  return e.length == kPageSize && e.held <= (2u << 20);
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

// What a page of its own holds on `dir`'s filesystem, measured as the agent
// does: a file of root's, written through.
uint64_t storage_of_a_page(const std::string& dir) {
  std::string name = dir + "/probe-XXXXXX";
  UniqueFd probe(mkostemp(name.data(), O_CLOEXEC));
  if (!probe.valid()) return 0;
  unlink(name.c_str());
  if (ftruncate(probe.get(), kPageSize) != 0) return 0;
  auto mapping = shm::map_fd(probe.get(), kPageSize, shm::Access::kReadWrite);
  if (!mapping) return 0;
  std::memset(mapping->get(), 1, kPageSize);
  return extent_of(probe.get()).held;
}

uint64_t page_trims(const AgentProcess& agent) {
  auto st = agent.call(protocol::StatusRequest{0, 0});
  if (!st) return 0;
  return nlohmann::json::parse(st->text)["agent"]["page_trims"].get<uint64_t>();
}

// Mallory's page, with an attribute whose block a trim cannot free and 1 MiB
// past its end, waited for (up to 60 s) until only the attribute's block is
// left. 0: so; 10: no attribute takes a block here; else what went wrong.
int page_with_untrimmable_storage(const AgentProcess& agent, uint64_t own) {
  return run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    const int fd = att->fds[kInstancePageFd];
    const std::string value(3000, 'x');  // too long to live in the inode
    if (fsetxattr(fd, "user.egpu-test", value.data(), value.size(), 0) != 0 ||
        extent_of(fd).held <= own) {
      return 10;
    }
    const off_t end = static_cast<off_t>((kPageSize + 4095) / 4096 * 4096);
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, end, 1 << 20) != 0) return 2;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (extent_of(fd).held > own + 4096) {
      if (std::chrono::steady_clock::now() > until) return 3;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  });
}

// Mallory's page holds storage a trim cannot free (see
// page_with_untrimmable_storage), once the agent has trimmed the rest.
class UntrimmableStorage : public PageGrowth {
 protected:
  void SetUp() override {
    ASSERT_TRUE(agent.start()) << agent.log();
    ASSERT_EQ(agent.call(create_request(kMalloryJob, 50, kMallory))->status, ReplyStatus::kOk);
    own = storage_of_a_page(agent.dir() + "/run");
    ASSERT_GT(own, 0u);
    const int made = page_with_untrimmable_storage(agent, own);
    if (made == 10) GTEST_SKIP() << "RuntimeDir's filesystem keeps no attribute in a block";
    ASSERT_EQ(made, 0) << "3: never trimmed";
  }
  uint64_t own = 0;  // what a page of its own holds
};

// Storage a trim cannot free had a trim chore started for it every second
// for as long as the page lived, freeing nothing. Such a page is trimmed
// again after 2, 4, 8 ... s; what grows past it is still taken back.
TEST_F(UntrimmableStorage, IsTrimmedLessAndLessOften) {
  // Ten looks (the count comes through the status, which only root sees):
  // trims after 2 and 4 s more, where every look started one before.
  const uint64_t trims_at_rest = page_trims(agent);
  std::this_thread::sleep_for(std::chrono::seconds(10));
  const uint64_t trims_later = page_trims(agent);
  EXPECT_GE(trims_at_rest, 1u);
  EXPECT_LE(trims_later - trims_at_rest, 3u) << "a page a trim cannot shrink was trimmed "
                                             << trims_later - trims_at_rest << " times in 10 s";
  // Growth past what is left is taken back (a retry may be under way as it
  // grows: only what is left in the end counts).
  const int regrown = run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    const int fd = att->fds[kInstancePageFd];
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 32 << 20) != 0) return 2;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (extent_of(fd).held > own + 4096) {
      if (std::chrono::steady_clock::now() > until) return 3;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  });
  EXPECT_EQ(regrown, 0) << "3: the growth was never taken back";
  EXPECT_GT(page_trims(agent), trims_later);
}

// Storage a trim cannot free (on ext4, an extended attribute's block) was
// taken for the page's own and allowed for good, as the look after a trim
// read it; a job growing its page again between the trim and that look had
// its growth allowed the same way (up to a huge page per page: 32 pages
// fill run-egpu.mount). What a page may hold is measured on a file of
// root's: a block grown after the attribute is gone is taken back.
TEST_F(UntrimmableStorage, IsNotAllowedForGood) {
  // The same room again, past the end.
  const int swapped = run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    const int fd = att->fds[kInstancePageFd];
    const off_t end = static_cast<off_t>((kPageSize + 4095) / 4096 * 4096);
    if (fremovexattr(fd, "user.egpu-test") != 0) return 4;
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, end, 4096) != 0) return 5;
    return held_comes_down_to(fd, own) ? 0 : 6;
  });
  EXPECT_EQ(swapped, 0) << "6: the block grown after was never taken back";
}

// A tmpfs for RuntimeDir, as run-egpu.mount makes one: small, so that a job
// can fill it. Detached at the end (the agent may still hold files there).
class SmallRuntimeFilesystem {
 public:
  explicit SmallRuntimeFilesystem(std::string dir, const char* size = "1m") : dir_(std::move(dir)) {
    const std::string options = std::string("size=") + size + ",mode=0755";
    mounted_ = mount("tmpfs", dir_.c_str(), "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                     options.c_str()) == 0;
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

// No heartbeat look before the create (HeartbeatMs at its largest): the
// create that finds no room says why and starts taking the growth back; a
// create after that finds the room.
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
  auto refused = agent.call(create_request(kHonestJob, 50, kHonest));
  ASSERT_TRUE(refused) << refused.error();
  ASSERT_NE(refused->status, ReplyStatus::kOk);
  EXPECT_NE(refused->text.find("a job grew its page into RuntimeDir's room"), std::string::npos)
      << refused->text;
  // Tried again as the message says, until the growth is back (its chore
  // runs at once; the deadline only ends a failing case).
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  Result<protocol::Reply> reply = Error{"not tried"};
  do {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    reply = agent.call(create_request(kHonestJob, 50, kHonest));
    ASSERT_TRUE(reply) << reply.error();
  } while (reply->status != ReplyStatus::kOk && std::chrono::steady_clock::now() < until);
  EXPECT_EQ(reply->status, ReplyStatus::kOk) << reply->text;
  auto st = agent.call(protocol::StatusRequest{0, 0});
  ASSERT_TRUE(st) << st.error();
  EXPECT_TRUE(nlohmann::json::parse(st->text)["agent"]["runtime_dir_own_filesystem"].get<bool>())
      << st->text;
}

// The first page on RuntimeDir's filesystem took the last of its room, so
// the agent could not measure what a page's own storage is there. It took
// a huge page for it, for good: the job then fallocated 1.5 MiB past its
// page's end (FALLOC_FL_KEEP_SIZE), and that was never taken back, on every
// such page. Now it measures again once there is room.
TEST(PageGrowthOnItsOwnFilesystem, APageOpenedWithNoRoomToMeasureIsStillTrimmed) {
  if (geteuid() != 0) GTEST_SKIP() << "mounts a tmpfs and plays other uids: needs root";
  AgentProcess agent;
  SmallRuntimeFilesystem fs(agent.dir() + "/run", "4m");
  if (!fs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << fs.error();
  ASSERT_TRUE(agent.start()) << agent.log();
  // Root fills the filesystem to a page's room, then the create takes it.
  const std::string filler = agent.dir() + "/run/filler";
  {
    UniqueFd fd(open(filler.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600));
    ASSERT_TRUE(fd.valid());
    struct statvfs vfs {};
    ASSERT_EQ(fstatvfs(fd.get(), &vfs), 0);
    const uint64_t page_room = (kPageSize + 4095) / 4096 * 4096;
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    ASSERT_GT(free_bytes, page_room);
    ASSERT_EQ(fallocate(fd.get(), 0, 0, static_cast<off_t>(free_bytes - page_room)), 0)
        << std::strerror(errno);
  }
  auto created = agent.call(create_request(kMalloryJob, 50, kMallory));
  ASSERT_TRUE(created) << created.error();
  ASSERT_EQ(created->status, ReplyStatus::kOk) << created->text;
  ASSERT_EQ(unlink(filler.c_str()), 0);
  // Its own storage on a tmpfs of 4 KiB pages, not the 2 MiB of a huge one.
  const uint64_t page_room = (kPageSize + 4095) / 4096 * 4096;
  const int rc = run_as(kMallory, [&] {
    auto att = attach(agent.socket(), kMalloryJob, 0, 0);
    if (!att || att->reply.status != ReplyStatus::kOk || att->fds.size() < 3) return 1;
    const int fd = att->fds[kInstancePageFd];
    if (fallocate(fd, FALLOC_FL_KEEP_SIZE, 65536, off_t{1536} << 10) != 0) return 2;
    return held_comes_down_to(fd, page_room) ? 0 : 3;
  });
  EXPECT_EQ(rc, 0) << "2: the page could not grow; 3: the growth was never taken back";
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
