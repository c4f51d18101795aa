// The attach exchange against sockets that misbehave: missing, closing at once,
// answering garbage, refusing, never answering, or sending the wrong
// descriptors. Each must end in a clear error within the timeout, never a
// hang, and every descriptor that arrived must end up owned: handed over, or
// closed.
#include "core/protocol/attach_exchange.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "core/protocol/codec.h"
#include "core/util/clock.h"
#include "tests/unit/protocol/scripted_agent.h"

namespace egpu::protocol {
namespace {

using test::read_request;
using test::ScriptedAgent;
using test::send_with_fds;
using test::wait_for_close;

const AttachRequest kRequest{77, 0, 0};

struct Outcome {
  CallResult<AttachReply> result = CallError{CallFailure::kUnreachable, "not run"};
  int64_t elapsed_ms = 0;
};

Outcome attach(const std::string& path, int timeout_ms = 1000) {
  const int64_t start = monotonic_ns();
  auto result = request_attach(path, kRequest, timeout_ms);
  return Outcome{std::move(result), (monotonic_ns() - start) / 1'000'000};
}

// The exchange failed as `kind`, with `part` in its message.
void expect_failure(const Outcome& o, CallFailure kind, const std::string& part) {
  ASSERT_FALSE(o.result.ok());
  EXPECT_EQ(o.result.failure(), kind) << o.result.error();
  EXPECT_NE(o.result.error().find(part), std::string::npos) << o.result.error();
}

Reply ok_reply() {
  Reply r;
  r.instance_id = 5;
  return r;
}

TEST(RequestAttach, NoSocketIsUnreachable) {
  const Outcome o = attach("/tmp/egpu-shim-no-such-agent.sock");
  expect_failure(o, CallFailure::kUnreachable, "No such file");
}

TEST(RequestAttach, OverlongPathIsRefused) {
  const Outcome o = attach("/tmp/" + std::string(200, 'x'));
  expect_failure(o, CallFailure::kRefused, "not usable");
}

TEST(RequestAttach, ClosedConnectionIsUnreachable) {
  ScriptedAgent agent([](int) {});
  const Outcome o = attach(agent.path());
  expect_failure(o, CallFailure::kUnreachable, "closed");
}

TEST(RequestAttach, GarbageReplyIsRejected) {
  ScriptedAgent agent([](int conn) {
    read_request(conn);
    const std::string garbage = "HTTP/1.0 200 OK\r\n\r\nhello";
    send_with_fds(conn, std::vector<uint8_t>(garbage.begin(), garbage.end()));
  });
  const Outcome o = attach(agent.path());
  expect_failure(o, CallFailure::kUnreachable, "malformed reply");
}

TEST(RequestAttach, ReplyToAnotherRequestIsRejected) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    send_with_fds(conn, encode_reply(Reply{}, id + 1));
  });
  const Outcome o = attach(agent.path());
  expect_failure(o, CallFailure::kUnreachable, "expected");
}

TEST(RequestAttach, RefusalCarriesTheAgentsText) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    Reply r;
    r.status = ReplyStatus::kNotFound;
    r.text = "no instance for job 77 step 0 on GPU 0";
    send_with_fds(conn, encode_reply(r, id));
  });
  const Outcome o = attach(agent.path());
  expect_failure(o, CallFailure::kRefused, "no instance for job 77");
}

TEST(RequestAttach, SilentAgentTimesOut) {
  ScriptedAgent agent([](int conn) {
    read_request(conn);
    wait_for_close(conn);
  });
  const Outcome o = attach(agent.path(), 200);
  expect_failure(o, CallFailure::kUnreachable, "timed out");
  EXPECT_GE(o.elapsed_ms, 200);     // at the deadline, not before it
  EXPECT_LT(o.elapsed_ms, 30'000);  // nor long after (a loaded machine may be late)
}

TEST(RequestAttach, OkWithoutDescriptorsIsRejected) {
  ScriptedAgent agent([](int conn) {
    const uint32_t id = read_request(conn);
    send_with_fds(conn, encode_reply(ok_reply(), id));
  });
  const Outcome o = attach(agent.path());
  expect_failure(o, CallFailure::kUnreachable, "0 descriptors");
}

ino_t inode_of(int fd) {
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  return st.st_ino;
}

bool closes_on_exec(int fd) {
  const int flags = fcntl(fd, F_GETFD);
  return flags >= 0 && (flags & FD_CLOEXEC) != 0;
}

// A pipe whose read end tells whether any copy of its write end is still open.
struct Pipe {
  int read_end = -1;
  int write_end = -1;
  Pipe() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
    read_end = fds[0];
    write_end = fds[1];
  }
  ~Pipe() {
    close(read_end);
    if (write_end >= 0) close(write_end);
  }
  void close_write_end() {
    close(write_end);
    write_end = -1;
  }
  // End of file: no write end left open anywhere (this process included).
  bool all_writers_closed() const {
    char c;
    return read(read_end, &c, 1) == 0;
  }
};

TEST(RequestAttach, DescriptorsAreReceivedInOrderAndOwned) {
  const int gpu_page = memfd_create("gpu", MFD_CLOEXEC);
  const int instance_page = memfd_create("instance", MFD_CLOEXEC);
  Pipe wake;
  Outcome o;
  {
    ScriptedAgent agent([&](int conn) {
      const uint32_t id = read_request(conn);
      send_with_fds(conn, encode_reply(ok_reply(), id), {gpu_page, instance_page, wake.write_end});
    });
    o = attach(agent.path());
  }
  ASSERT_TRUE(o.result.ok()) << o.result.error();
  AttachReply& r = *o.result;
  EXPECT_EQ(r.reply.instance_id, 5u);
  ASSERT_TRUE(r.gpu_page.valid() && r.instance_page.valid() && r.wake.valid());
  EXPECT_NE(r.gpu_page.get(), gpu_page);  // a descriptor of its own, on the same file
  EXPECT_EQ(inode_of(r.gpu_page.get()), inode_of(gpu_page));
  EXPECT_EQ(inode_of(r.instance_page.get()), inode_of(instance_page));
  EXPECT_EQ(inode_of(r.wake.get()), inode_of(wake.write_end));
  EXPECT_TRUE(closes_on_exec(r.gpu_page.get()));
  EXPECT_TRUE(closes_on_exec(r.instance_page.get()));
  EXPECT_TRUE(closes_on_exec(r.wake.get()));
  close(gpu_page);
  close(instance_page);
  wake.close_write_end();
  EXPECT_FALSE(wake.all_writers_closed());  // the reply holds the wake channel
  o.result = CallError{CallFailure::kUnreachable, "dropped"};
  EXPECT_TRUE(wake.all_writers_closed());
}

// Every reply the exchange cannot use: its descriptors are closed, none leaks.
void expect_descriptors_closed(const char* what, std::function<void(int conn, int fd)> script,
                               const std::string& expected_error) {
  SCOPED_TRACE(what);
  Pipe probe;
  Outcome o;
  {
    ScriptedAgent agent([&](int conn) { script(conn, probe.write_end); });
    o = attach(agent.path());
  }
  probe.close_write_end();
  ASSERT_FALSE(o.result.ok());
  EXPECT_NE(o.result.error().find(expected_error), std::string::npos) << o.result.error();
  EXPECT_TRUE(probe.all_writers_closed()) << "a received descriptor was left open";
}

TEST(RequestAttach, DescriptorsOfAnUnusableReplyAreClosed) {
  expect_descriptors_closed(
      "garbage",
      [](int conn, int fd) {
        read_request(conn);
        send_with_fds(conn, {1, 2, 3, 4, 5, 6, 7, 8}, {fd, fd, fd});
      },
      "malformed reply");
  expect_descriptors_closed(
      "refusal",
      [](int conn, int fd) {
        Reply r;
        r.status = ReplyStatus::kDenied;
        send_with_fds(conn, encode_reply(r, read_request(conn)), {fd, fd, fd});
      },
      "refused");
  expect_descriptors_closed(
      "too few",
      [](int conn, int fd) {
        send_with_fds(conn, encode_reply(ok_reply(), read_request(conn)), {fd, fd});
      },
      "2 descriptors");
  expect_descriptors_closed(
      "more than a reply may carry",
      [](int conn, int fd) {
        send_with_fds(conn, encode_reply(ok_reply(), read_request(conn)),
                      {fd, fd, fd, fd, fd, fd, fd});
      },
      "truncated");
  expect_descriptors_closed(
      "wrong request id",
      [](int conn, int fd) {
        send_with_fds(conn, encode_reply(ok_reply(), read_request(conn) + 1), {fd, fd, fd});
      },
      "expected");
}

}  // namespace
}  // namespace egpu::protocol
