// UnixAddress: the address of a Unix socket at any path. sockaddr_un holds
// 107 bytes of path, and a deep SocketPath (a checkout's test cluster, a
// site's long RuntimeDir) and the users' sockets beside it can pass that. A
// longer path is reached through its directory, opened O_PATH, as
// /proc/thread-self/fd/N/NAME: the kernel resolves that as it would the
// path, for bind and connect alike. The directory stays open as long as the
// address.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstddef>
#include <string>

#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::protocol {

class UnixAddress {
 public:
  // The longest socket name a path that does not fit can have: what an
  // address holds past "/proc/thread-self/fd/N/".
  static constexpr size_t kMaxNameBytes = 107 - (sizeof "/proc/thread-self/fd/2147483647/" - 1);

  // An error names the path and why (empty, a name too long even alone, a
  // directory that cannot be opened, no /proc); its error_code() is the
  // errno where one may pass (a directory not there yet, no descriptors).
  static Result<UnixAddress> of(const std::string& path);

  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&addr_); }
  socklen_t size() const { return sizeof addr_; }
  // True when the path is reached through its directory's descriptor.
  bool through_directory() const { return dir_.valid(); }

 private:
  UnixAddress() = default;
  sockaddr_un addr_{};
  UniqueFd dir_;
};

}  // namespace egpu::protocol
