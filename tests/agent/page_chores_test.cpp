// PageChores::unlink_page removes a page's name and directory only while the
// name is still that page's: a chore that runs late (its instance id used
// again, its page replaced) must not take the name of the page after it.
#include "nodeagent/page_chores.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>

namespace egpu::agent {
namespace {

using namespace std::chrono_literals;

// Waits (up to a minute: the deadline only ends a failing case) for the chores.
bool chores_done() {
  const auto until = std::chrono::steady_clock::now() + 60s;
  while (PageChores::pending() > 0) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

class PageChoresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(PageChores::start());
    std::string tmpl = std::string(::testing::TempDir()) + "/egpu-chores-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/instance-1.d";
    page_ = dir_ + "/page";
    ASSERT_EQ(::mkdir(dir_.c_str(), 0711), 0);
  }
  void TearDown() override {
    ::unlink(page_.c_str());
    ::rmdir(dir_.c_str());
    ::rmdir(root_.c_str());
  }
  int make_page() const {
    const int fd = ::open(page_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::ftruncate(fd, 4096), 0);
    return fd;
  }
  bool exists(const std::string& path) const {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
  }

  std::string root_, dir_, page_;
};

TEST_F(PageChoresTest, APagesNameAndDirectoryGo) {
  const int fd = make_page();
  ASSERT_TRUE(PageChores::unlink_page(::getuid(), fd, 4096, page_, dir_));
  ASSERT_TRUE(chores_done());
  EXPECT_FALSE(exists(page_));
  EXPECT_FALSE(exists(dir_));
}

TEST_F(PageChoresTest, ANameThatNamesAnotherPageNowIsLeft) {
  const int old_page = make_page();
  // The old page's name goes, and a new page takes it, before the chore runs.
  ASSERT_EQ(::unlink(page_.c_str()), 0);
  const int new_page = make_page();
  ASSERT_TRUE(PageChores::unlink_page(::getuid(), old_page, 4096, page_, dir_));
  ASSERT_TRUE(chores_done());
  EXPECT_TRUE(exists(page_));
  EXPECT_TRUE(exists(dir_));
  struct stat named {
  }, held{};
  ASSERT_EQ(::lstat(page_.c_str(), &named), 0);
  ASSERT_EQ(::fstat(new_page, &held), 0);
  EXPECT_EQ(named.st_ino, held.st_ino);
  ::close(new_page);
}

TEST_F(PageChoresTest, UnlinkIfNamedComparesTheFile) {
  const int fd = make_page();
  const std::string other = dir_ + "/other";
  ASSERT_EQ(::rename(page_.c_str(), other.c_str()), 0);
  const int stranger = make_page();
  EXPECT_FALSE(PageChores::unlink_if_named(fd, page_));
  EXPECT_TRUE(exists(page_));
  EXPECT_TRUE(PageChores::unlink_if_named(fd, other));
  EXPECT_FALSE(exists(other));
  EXPECT_FALSE(PageChores::unlink_if_named(fd, other));  // no name at all
  ::close(fd);
  ::close(stranger);
}

}  // namespace
}  // namespace egpu::agent
