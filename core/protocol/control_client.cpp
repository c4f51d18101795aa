#include "core/protocol/control_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace egpu::protocol {
namespace {

std::string sys_error(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, timeout_ms);
  } while (rc < 0 && errno == EINTR);
  return rc > 0;
}

}  // namespace

std::string default_socket_path() {
  const char* env = std::getenv("EGPU_SOCKET");
  return env != nullptr && *env != '\0' ? env : "/run/egpu/agent.sock";
}

Result<ControlClient> ControlClient::connect(const std::string& path, int timeout_ms) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return Error{"socket path too long: " + path};
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return Error{sys_error("socket")};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno != EINPROGRESS && errno != EAGAIN) {
      return Error{"cannot reach the egpu agent at " + path + ": " + std::strerror(errno) +
                   " (is egpu-agentd running?)"};
    }
    if (!wait_for(fd.get(), POLLOUT, timeout_ms)) {
      return Error{"the egpu agent at " + path + " did not accept the connection in time"};
    }
  }
  return ControlClient(std::move(fd), timeout_ms);
}

Result<Reply> ControlClient::call(const Request& request) {
  const uint32_t id = next_id_++;
  return call_raw(encode_request(request, id), id);
}

Result<Reply> ControlClient::call_raw(const std::vector<uint8_t>& bytes, uint32_t request_id) {
  if (!wait_for(fd_.get(), POLLOUT, timeout_ms_))
    return Error{"the egpu agent is not accepting requests"};
  if (::send(fd_.get(), bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(bytes.size())) {
    return Error{sys_error("send to the egpu agent")};
  }
  return receive(request_id);
}

Result<Reply> ControlClient::receive(uint32_t request_id) {
  Reply joined;
  bool first = true;
  for (;;) {
    if (!wait_for(fd_.get(), POLLIN, timeout_ms_))
      return Error{"no reply from the egpu agent in time"};
    std::vector<uint8_t> buf(kMaxReplySize);
    const ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0) return Error{sys_error("receive from the egpu agent")};
    if (n == 0) return Error{"the egpu agent closed the connection"};
    buf.resize(static_cast<size_t>(n));
    auto r = decode_reply(buf, request_id);
    if (!r) return Error{"bad reply from the egpu agent: " + r.error()};
    const bool more = (r->flags & kReplyMore) != 0;
    std::string text = std::move(r->text);
    r->text.clear();
    if (first) {
      joined = std::move(*r);
      first = false;
    }
    joined.text += text;
    if (!more) {
      joined.flags = 0;
      return joined;
    }
  }
}

}  // namespace egpu::protocol
