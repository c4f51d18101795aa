#include "tests/security/control_socket_clients.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cstring>
#include <thread>

#include "core/protocol/codec.h"

namespace egpu::test {

using protocol::ReplyStatus;
using std::chrono::milliseconds;
using std::chrono::seconds;

void sleep_ms(int ms) {
  std::this_thread::sleep_for(milliseconds(ms));
}

int connect_unix(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  const auto deadline = Clock::now() + seconds(2);
  for (;;) {
    int fd = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    const int err = errno;
    close(fd);
    if (err != EAGAIN || Clock::now() > deadline) return -1;
    sleep_ms(5);
  }
}

Holder spawn_holder(const std::string& socket, uid_t uid, int count, int settle_ms) {
  int report[2];
  if (pipe(report) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    close(report[0]);
    if (!become(uid)) _exit(99);
    std::vector<int> fds;
    for (int i = 0; i < count; ++i) {
      const int fd = connect_unix(socket);
      if (fd < 0) break;
      fds.push_back(fd);
      auto bytes = protocol::encode_request(protocol::StatusRequest{0, 0}, 1);
      (void)!::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    // Every connection ends answered or closed; wait for all (bounded).
    std::vector<int> state(fds.size(), 0);  // 0 pending, 1 answered, 2 closed
    const auto deadline = Clock::now() + milliseconds(settle_ms);
    std::vector<uint8_t> buf(protocol::kMaxReplySize);
    for (;;) {
      std::vector<pollfd> pfds;
      std::vector<size_t> which;
      for (size_t i = 0; i < fds.size(); ++i) {
        if (state[i] != 0) continue;
        pfds.push_back({fds[i], POLLIN, 0});
        which.push_back(i);
      }
      if (pfds.empty() || Clock::now() > deadline) break;
      if (poll(pfds.data(), pfds.size(), 100) <= 0) continue;
      for (size_t k = 0; k < pfds.size(); ++k) {
        if (pfds[k].revents == 0) continue;
        const ssize_t n = recv(pfds[k].fd, buf.data(), buf.size(), MSG_DONTWAIT);
        if (n > 0) state[which[k]] = 1;
        if (n == 0 || (n < 0 && errno != EAGAIN)) state[which[k]] = 2;
      }
    }
    int answered = 0;
    for (int s : state)
      answered += s == 1 ? 1 : 0;
    (void)!write(report[1], &answered, sizeof answered);
    for (;;)
      pause();
  }
  close(report[1]);
  return Holder{pid, report[0], -1};
}

void collect(Holder& h, int wait_ms) {
  pollfd p{h.report_fd, POLLIN, 0};
  if (poll(&p, 1, wait_ms) == 1 && read(h.report_fd, &h.answered, sizeof h.answered) == 4) return;
  h.answered = -1;
}

void release(Holder& h) {
  if (h.pid > 0) {
    kill(h.pid, SIGKILL);
    waitpid(h.pid, nullptr, 0);
  }
  if (h.report_fd >= 0) close(h.report_fd);
  h = Holder{};
}

int status_as(const std::string& socket, uid_t uid) {
  return run_as(uid, [&] {
    auto c = protocol::ControlClient::connect_only(socket);
    if (!c) return 10;
    auto st = c->call(protocol::StatusRequest{0, 0});
    if (!st) return 11;
    return st->status == ReplyStatus::kOk ? 0 : 12;
  });
}

int status_as_client(const std::string& socket, uid_t uid) {
  return run_as(uid, [&] {
    // A bound for a hung agent, not a measure of a busy host.
    auto c = protocol::ControlClient::connect(socket, 30'000);
    if (!c) return 10;
    auto status = c->call(protocol::StatusRequest{0, 0});
    return !status ? 11 : status->status == ReplyStatus::kOk ? 0 : 12;
  });
}

bool eventually(const std::function<bool()>& ok, seconds limit) {
  const auto deadline = Clock::now() + limit;
  while (!ok()) {
    if (Clock::now() > deadline) return false;
    sleep_ms(100);
  }
  return true;
}

size_t open_fds(pid_t pid) {
  size_t n = 0;
  if (DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent* e = readdir(d))
      n += e->d_name[0] != '.' ? 1 : 0;
    closedir(d);
  }
  return n;
}

}  // namespace egpu::test
