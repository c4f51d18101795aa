// make_attachment against what a misbehaving agent may send through a
// well-formed attach exchange: descriptors that are not pages, or pages that
// are too small. Each is refused with a clear error, never mapped and used.
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

TEST(Attachment, TooSmallPageFilesAreRejected) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    char name[] = "/tmp/egpu-shim-page-XXXXXX";
    const int fd = mkstemp(name);
    unlink(name);
    ASSERT_EQ(ftruncate(fd, 100), 0);
    send_with_fds(conn, protocol::encode_reply(ok_reply(), id), {fd, fd, fd});
    close(fd);
  });
  auto reply = protocol::request_attach(agent.path(), kRequest, 1000);
  ASSERT_TRUE(reply.ok()) << reply.error();
  auto made = make_attachment(std::move(*reply), 0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().find("100 bytes"), std::string::npos) << made.error();
}

}  // namespace
}  // namespace egpu::shim
