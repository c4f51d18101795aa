// core/util/trusted_paths.h: where the agent may bind its sockets and keep
// its pages, and setting a socket's mode.
#include "core/util/trusted_paths.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace egpu {
namespace {

constexpr uid_t kNobody = 65534;

class TrustedDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/egpu-trusted-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    top_ = tmpl;
    ASSERT_EQ(chmod(top_.c_str(), 0755), 0);
  }
  void TearDown() override { (void)!std::system(("rm -rf '" + top_ + "'").c_str()); }
  std::string make(const std::string& name, mode_t mode) {
    const std::string path = top_ + "/" + name;
    EXPECT_EQ(mkdir(path.c_str(), 0700), 0) << path;
    EXPECT_EQ(chmod(path.c_str(), mode), 0) << path;  // past the umask
    return path;
  }
  std::string top_;
};

TEST_F(TrustedDirectory, OursAndRootsDirectoriesAreTrusted) {
  const std::string sub = make("a", 0755);
  EXPECT_TRUE(check_trusted_directory(make("a/b", 0700), geteuid()).ok());
  EXPECT_TRUE(check_trusted_directory(sub, geteuid()).ok());
  EXPECT_TRUE(check_trusted_directory("/", geteuid()).ok());
}

// Anyone may add names in /tmp, but not rename or remove root's.
TEST_F(TrustedDirectory, AStickyDirectoryWritableByAllIsTrusted) {
  const std::string sticky = make("sticky", 01777);
  EXPECT_TRUE(check_trusted_directory(make("sticky/run", 0755), geteuid()).ok());
  EXPECT_TRUE(check_trusted_directory(sticky, geteuid()).ok());
}

TEST_F(TrustedDirectory, ADirectoryOthersMayWriteIsRefusedWhereverItIs) {
  const std::string open = make("open", 0777);
  const std::string below = make("open/run", 0755);
  for (const std::string& dir : {open, below}) {
    const Status s = check_trusted_directory(dir, geteuid());
    ASSERT_FALSE(s.ok()) << dir;
    EXPECT_NE(s.error().find(open + " (owner uid"), std::string::npos) << s.error();
    EXPECT_NE(s.error().find("mode 0777"), std::string::npos) << s.error();
  }
}

TEST_F(TrustedDirectory, ADirectoryItsGroupMayWriteIsRefusedUnlessTheGroupIsRoots) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the directory root's group and another";
  const std::string dir = make("group", 0775);
  ASSERT_EQ(chown(dir.c_str(), static_cast<uid_t>(-1), 0), 0);
  EXPECT_TRUE(check_trusted_directory(dir, geteuid()).ok());
  ASSERT_EQ(chown(dir.c_str(), static_cast<uid_t>(-1), kNobody), 0);
  EXPECT_FALSE(check_trusted_directory(dir, geteuid()).ok());
}

TEST_F(TrustedDirectory, AnotherUsersDirectoryIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the directory to another user";
  const std::string dir = make("theirs", 0755);
  ASSERT_EQ(chown(dir.c_str(), kNobody, kNobody), 0);
  const Status s = check_trusted_directory(make("theirs/run", 0755), 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find(dir + " (owner uid 65534"), std::string::npos) << s.error();
}

// A symlink is followed, and where it leads is what is checked.
TEST_F(TrustedDirectory, ASymlinkIsJudgedByWhereItLeads) {
  const std::string open = make("open", 0777);
  const std::string link = top_ + "/link";
  ASSERT_EQ(symlink(open.c_str(), link.c_str()), 0);
  EXPECT_FALSE(check_trusted_directory(link, geteuid()).ok());
  const std::string fine = make("fine", 0755);
  const std::string link2 = top_ + "/link2";
  ASSERT_EQ(symlink(fine.c_str(), link2.c_str()), 0);
  EXPECT_TRUE(check_trusted_directory(link2, geteuid()).ok());
}

// The agent creates by the path as configured: a symlink on it that another
// user owns could be pointed at a directory of theirs after the check.
TEST_F(TrustedDirectory, ASymlinkOfAnotherUserOnTheWayIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to give the symlink to another user";
  const std::string fine = make("fine", 0755);
  const std::string link = top_ + "/theirs";
  ASSERT_EQ(symlink(fine.c_str(), link.c_str()), 0);
  ASSERT_EQ(lchown(link.c_str(), kNobody, kNobody), 0);
  const Status s = check_trusted_directory(link, 0);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find(link + " is a symlink of uid 65534"), std::string::npos) << s.error();
}

TEST_F(TrustedDirectory, AMissingDirectoryIsAnError) {
  const Status s = check_trusted_directory(top_ + "/none", geteuid());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().find("cannot resolve"), std::string::npos) << s.error();
}

// What a user put in place of the socket between bind and chmod keeps its
// mode: a symlink (to /etc/shadow, say) is not followed, and a file is no
// socket.
TEST_F(TrustedDirectory, ASocketsModeIsSetOnTheSocketAlone) {
  const std::string target = top_ + "/shadow";
  { std::ofstream(target) << "secret"; }
  ASSERT_EQ(chmod(target.c_str(), 0600), 0);
  const std::string at = top_ + "/agent.sock";
  ASSERT_EQ(symlink(target.c_str(), at.c_str()), 0);
  const Status via_link = set_socket_mode(at, 0666);
  EXPECT_FALSE(via_link.ok());
  struct stat st {};
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "chmod followed the symlink";
  EXPECT_FALSE(set_socket_mode(target, 0666).ok());
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << "a file that is no socket was changed";

  // The socket itself is changed.
  ASSERT_EQ(unlink(at.c_str()), 0);
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", at.c_str());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_TRUE(set_socket_mode(at, 0666).ok());
  ASSERT_EQ(lstat(at.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u);
  close(fd);
}

}  // namespace
}  // namespace egpu
