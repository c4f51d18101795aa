// UnixAddress: a path that fits is the address itself; a longer one is
// reached through its directory, for bind and connect alike.
#include "core/protocol/unix_address.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace egpu::protocol {
namespace {

class UnixAddressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/egpu-unix-address-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_F(UnixAddressTest, APathThatFitsIsTheAddress) {
  const std::string path = dir_ + "/agent.sock";
  auto addr = UnixAddress::of(path);
  ASSERT_TRUE(addr.ok()) << addr.error();
  EXPECT_FALSE(addr->through_directory());
  EXPECT_EQ(reinterpret_cast<const sockaddr_un*>(addr->get())->sun_path, path);
}

TEST_F(UnixAddressTest, ALongerPathIsBoundAndReachedThroughItsDirectory) {
  const std::string deep = dir_ + "/" + std::string(80, 'd') + "/" + std::string(80, 'e');
  std::filesystem::create_directories(deep);
  const std::string path = deep + "/agent.sock";
  ASSERT_GT(path.size(), sizeof(sockaddr_un{}.sun_path));
  auto bind_addr = UnixAddress::of(path);
  ASSERT_TRUE(bind_addr.ok()) << bind_addr.error();
  EXPECT_TRUE(bind_addr->through_directory());
  UniqueFd server(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::bind(server.get(), bind_addr->get(), bind_addr->size()), 0) << strerror(errno);
  ASSERT_EQ(::listen(server.get(), 4), 0);
  // The socket is where the path says, not somewhere under /proc.
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  auto connect_addr = UnixAddress::of(path);
  ASSERT_TRUE(connect_addr.ok()) << connect_addr.error();
  UniqueFd client(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  ASSERT_EQ(::connect(client.get(), connect_addr->get(), connect_addr->size()), 0)
      << strerror(errno);
  UniqueFd accepted(::accept4(server.get(), nullptr, nullptr, SOCK_CLOEXEC));
  EXPECT_TRUE(accepted.valid());
}

TEST_F(UnixAddressTest, UnusablePathsAreRefusedWithTheReason) {
  const std::string missing = dir_ + "/" + std::string(120, 'm') + "/agent.sock";
  auto no_dir = UnixAddress::of(missing);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.error().find("cannot open its directory"), std::string::npos) << no_dir.error();
  auto long_name = UnixAddress::of(dir_ + "/" + std::string(120, 'n'));
  ASSERT_FALSE(long_name.ok());
  EXPECT_NE(long_name.error().find("name alone is too long"), std::string::npos)
      << long_name.error();
  auto empty = UnixAddress::of("");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().find("not usable"), std::string::npos) << empty.error();
}

}  // namespace
}  // namespace egpu::protocol
