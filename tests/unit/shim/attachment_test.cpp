// make_attachment against what a misbehaving agent may send through a
// well-formed attach exchange: descriptors that are not pages, or pages that
// are too small or another user's. Each is refused with a clear error, never
// mapped and used.
#include "shim/attachment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "core/protocol/attach_exchange.h"
#include "core/protocol/codec.h"
#include "tests/unit/protocol/scripted_agent.h"

namespace egpu::shim {
namespace {

using test::read_request;
using test::ScriptedAgent;
using test::send_with_fds;

const protocol::AttachRequest kRequest{77, 0, 0};

protocol::Reply ok_reply() {
  protocol::Reply r;
  r.instance_id = 5;
  return r;
}

TEST(Attachment, DescriptorsThatAreNotPagesAreRejectedByTheMapper) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    send_with_fds(conn, protocol::encode_reply(ok_reply(), id), {null_fd, null_fd, null_fd});
    close(null_fd);
  });
  auto reply = protocol::request_attach(agent.path(), kRequest, 1000);
  ASSERT_TRUE(reply.ok()) << reply.error();
  EXPECT_TRUE(reply->gpu_page.valid());
  auto made = make_attachment(std::move(*reply), 0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().find("not a regular file"), std::string::npos) << made.error();
}

// make_attachment of an attach reply whose three descriptors are one
// unlinked file of `size` bytes owned by `owner`: its error, or "" if made.
std::string attach_to_one_file(off_t size, uid_t owner) {
  ScriptedAgent agent([size, owner](int conn) {
    const uint32_t id = read_request(conn);
    char name[] = "/tmp/egpu-shim-page-XXXXXX";
    const int fd = mkstemp(name);
    unlink(name);
    ASSERT_EQ(ftruncate(fd, size), 0);
    ASSERT_EQ(fchown(fd, owner, static_cast<gid_t>(-1)), 0);  // group kept
    send_with_fds(conn, protocol::encode_reply(ok_reply(), id), {fd, fd, fd});
    close(fd);
  });
  auto reply = protocol::request_attach(agent.path(), kRequest, 1000);
  if (!reply.ok()) return "no reply: " + reply.error();
  auto made = make_attachment(std::move(*reply), 0);
  return made.ok() ? "" : made.error();
}

TEST(Attachment, TooSmallPageFilesAreRejected) {
  const std::string error = attach_to_one_file(100, geteuid());
  EXPECT_NE(error.find("100 bytes"), std::string::npos) << error;
}

// An older agent attached root to its users' instances: a page another
// user can write is refused (its robust lock would run that user's list
// pointers in this process).
TEST(Attachment, APageOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "chowns a page to another uid: needs root";
  const std::string error =
      attach_to_one_file(sizeof(shm::GpuPage) + sizeof(shm::InstancePage), 4242);
  EXPECT_NE(error.find("belongs to uid 4242"), std::string::npos) << error;
}

}  // namespace
}  // namespace egpu::shim
