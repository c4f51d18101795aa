#include "tests/unit/protocol/scripted_agent.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <span>

#include "core/protocol/codec.h"

namespace egpu::test {
namespace {

constexpr size_t kMaxScriptFds = 8;

std::string fresh_path() {
  static std::atomic<int> counter{0};
  return "/tmp/egpu-scripted-agent-" + std::to_string(getpid()) + "-" +
         std::to_string(counter.fetch_add(1)) + ".sock";
}

}  // namespace

ScriptedAgent::ScriptedAgent(std::function<void(int conn)> script) : path_(fresh_path()) {
  unlink(path_.c_str());
  listener_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
  EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(listen(listener_, 4), 0);
  thread_ = std::thread([this, script = std::move(script)] {
    const int conn = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn >= 0) {
      script(conn);
      close(conn);
    }
  });
}

ScriptedAgent::~ScriptedAgent() {
  shutdown(listener_, SHUT_RDWR);  // ends an accept still waiting
  wait();
  close(listener_);
  unlink(path_.c_str());
}

void ScriptedAgent::wait() {
  if (thread_.joinable()) thread_.join();
}

uint32_t read_request(int conn) {
  uint8_t buf[protocol::kMaxRequestSize];
  const ssize_t n = recv(conn, buf, sizeof buf, 0);
  if (n <= 0) return 0;
  auto decoded = protocol::decode_request(std::span<const uint8_t>(buf, static_cast<size_t>(n)));
  return decoded ? decoded->request_id : 0;
}

void wait_for_close(int conn) {
  pollfd p{conn, POLLIN, 0};
  uint8_t buf[protocol::kMaxRequestSize];
  while (poll(&p, 1, 60'000) > 0 && recv(conn, buf, sizeof buf, MSG_DONTWAIT) > 0) {
  }
}

bool send_with_fds(int conn, const std::vector<uint8_t>& bytes, const std::vector<int>& fds) {
  EXPECT_LE(fds.size(), kMaxScriptFds);
  iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxScriptFds)] = {};
  if (!fds.empty() && fds.size() <= kMaxScriptFds) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return sendmsg(conn, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

}  // namespace egpu::test
