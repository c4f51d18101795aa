// The attach client against sockets that misbehave: missing, closing at once,
// answering garbage, refusing, never answering, or sending the wrong
// descriptors. Each must end in a clear error within the timeout, never a hang.
#include "shim/attach_client.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <thread>

#include "core/protocol/codec.h"
#include "core/util/clock.h"
#include "shim/attachment.h"

namespace egpu::shim {
namespace {

// A one-connection SOCK_SEQPACKET server running `behave` on the accepted socket.
class ScriptedServer {
 public:
  explicit ScriptedServer(std::function<void(int)> behave) {
    path_ = "/tmp/egpu-shim-attach-" + std::to_string(getpid()) + "-" + std::to_string(counter_++) +
            ".sock";
    unlink(path_.c_str());
    listener_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listener_, 4), 0);
    thread_ = std::thread([this, behave = std::move(behave)] {
      const int conn = accept(listener_, nullptr, nullptr);
      if (conn >= 0) {
        behave(conn);
        close(conn);
      }
    });
  }
  ~ScriptedServer() {
    shutdown(listener_, SHUT_RDWR);
    thread_.join();
    close(listener_);
    unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
  int listener_ = -1;
  std::thread thread_;
};

// Reads the request and returns its id (0 if unreadable).
uint32_t read_request(int conn) {
  uint8_t buf[protocol::kMaxRequestSize];
  const ssize_t n = recv(conn, buf, sizeof buf, 0);
  if (n <= 0) return 0;
  auto decoded = protocol::decode_request(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
  return decoded ? decoded->request_id : 0;
}

void send_with_fds(int conn, const std::vector<uint8_t>& bytes, const std::vector<int>& fds) {
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)] = {};
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  EXPECT_EQ(sendmsg(conn, &msg, 0), static_cast<ssize_t>(bytes.size()));
}

const protocol::AttachRequest kRequest{77, 0, 0};

struct Outcome {
  bool ok;
  AttachError error;
  AttachReply reply;
  int64_t elapsed_ms;
};

Outcome attach(const std::string& path, int timeout_ms = 1000) {
  Outcome o{};
  const int64_t start = monotonic_ns();
  o.ok = request_attach(path, kRequest, timeout_ms, &o.reply, &o.error);
  o.elapsed_ms = (monotonic_ns() - start) / 1'000'000;
  return o;
}

TEST(AttachClient, NoSocketIsUnreachable) {
  const Outcome o = attach("/tmp/egpu-shim-no-such-agent.sock");
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error.kind, AttachFailure::kUnreachable);
  EXPECT_NE(o.error.message.find("No such file"), std::string::npos) << o.error.message;
}

TEST(AttachClient, OverlongPathIsRefused) {
  const Outcome o = attach("/tmp/" + std::string(200, 'x'));
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error.kind, AttachFailure::kRefused);
}

TEST(AttachClient, ClosedConnectionIsUnreachable) {
  ScriptedServer server([](int) {});
  const Outcome o = attach(server.path());
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error.kind, AttachFailure::kUnreachable);
  EXPECT_NE(o.error.message.find("closed"), std::string::npos) << o.error.message;
}

TEST(AttachClient, GarbageReplyIsRejected) {
  ScriptedServer server([](int conn) {
    read_request(conn);
    const char garbage[] = "HTTP/1.0 200 OK\r\n\r\nhello";
    send(conn, garbage, sizeof garbage, 0);
  });
  const Outcome o = attach(server.path());
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.message.find("malformed reply"), std::string::npos) << o.error.message;
}

TEST(AttachClient, ReplyToAnotherRequestIsRejected) {
  ScriptedServer server([](int conn) {
    const uint32_t id = read_request(conn);
    protocol::Reply r;
    send_with_fds(conn, protocol::encode_reply(r, id + 1), {});
  });
  const Outcome o = attach(server.path());
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.message.find("expected"), std::string::npos) << o.error.message;
}

TEST(AttachClient, RefusalCarriesTheAgentsText) {
  ScriptedServer server([](int conn) {
    const uint32_t id = read_request(conn);
    protocol::Reply r;
    r.status = protocol::ReplyStatus::kNotFound;
    r.text = "no instance for job 77 step 0 on GPU 0";
    send_with_fds(conn, protocol::encode_reply(r, id), {});
  });
  const Outcome o = attach(server.path());
  EXPECT_FALSE(o.ok);
  EXPECT_EQ(o.error.kind, AttachFailure::kRefused);
  EXPECT_NE(o.error.message.find("no instance for job 77"), std::string::npos) << o.error.message;
}

TEST(AttachClient, SilentAgentTimesOut) {
  ScriptedServer server([](int conn) {
    read_request(conn);
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
  });
  const Outcome o = attach(server.path(), 200);
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.message.find("timed out"), std::string::npos) << o.error.message;
  EXPECT_LT(o.elapsed_ms, 500);
}

TEST(AttachClient, OkWithoutDescriptorsIsRejected) {
  ScriptedServer server([](int conn) {
    const uint32_t id = read_request(conn);
    protocol::Reply r;
    r.instance_id = 5;
    send_with_fds(conn, protocol::encode_reply(r, id), {});
  });
  const Outcome o = attach(server.path());
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.message.find("0 descriptors"), std::string::npos) << o.error.message;
}

TEST(AttachClient, DescriptorsThatAreNotPagesAreRejectedByTheMapper) {
  ScriptedServer server([](int conn) {
    const uint32_t id = read_request(conn);
    protocol::Reply r;
    r.instance_id = 5;
    const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    send_with_fds(conn, protocol::encode_reply(r, id), {null_fd, null_fd, null_fd});
    close(null_fd);
  });
  Outcome o = attach(server.path());
  ASSERT_TRUE(o.ok) << o.error.message;
  EXPECT_TRUE(o.reply.gpu_page.valid());
  auto made = make_attachment(std::move(o.reply), 0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().find("not a regular file"), std::string::npos) << made.error();
}

TEST(AttachClient, TooSmallPageFilesAreRejected) {
  ScriptedServer server([](int conn) {
    const uint32_t id = read_request(conn);
    protocol::Reply r;
    r.instance_id = 5;
    char name[] = "/tmp/egpu-shim-page-XXXXXX";
    const int fd = mkstemp(name);
    unlink(name);
    ASSERT_EQ(ftruncate(fd, 100), 0);
    send_with_fds(conn, protocol::encode_reply(r, id), {fd, fd, fd});
    close(fd);
  });
  Outcome o = attach(server.path());
  ASSERT_TRUE(o.ok) << o.error.message;
  auto made = make_attachment(std::move(o.reply), 0);
  ASSERT_FALSE(made.ok());
  EXPECT_NE(made.error().find("100 bytes"), std::string::npos) << made.error();
}

}  // namespace
}  // namespace egpu::shim
