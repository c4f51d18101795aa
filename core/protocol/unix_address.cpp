#include "core/protocol/unix_address.h"

#include <fcntl.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace egpu::protocol {

Result<UnixAddress> UnixAddress::of(const std::string& path) {
  UnixAddress address;
  address.addr_.sun_family = AF_UNIX;
  if (path.empty() || path.find('\0') != std::string::npos) {
    return Error{"socket path '" + path + "' is not usable (empty or with a NUL byte)"};
  }
  if (path.size() < sizeof address.addr_.sun_path) {
    std::memcpy(address.addr_.sun_path, path.c_str(), path.size() + 1);
    return address;
  }
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos || slash + 1 == path.size()) {
    return Error{"socket path '" + path + "' is not usable (too long, and names no directory)"};
  }
  const std::string dir = slash == 0 ? "/" : path.substr(0, slash);
  const std::string name = path.substr(slash + 1);
  if (name.size() > kMaxNameBytes) {
    return Error{"socket path '" + path +
                 "' is not usable (its name alone is too long for a socket)"};
  }
  // The calling thread's descriptors: /proc/self is the main thread's,
  // which may have exited (a program whose other threads go on), or have
  // another descriptor table.
  if (::access("/proc/thread-self/fd", F_OK) != 0) {
    return Error{"socket path '" + path + "' is not usable (longer than a socket address holds, " +
                     "it is reached through /proc/thread-self, which is not here)",
                 ENOENT};
  }
  address.dir_.reset(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!address.dir_.valid()) {
    const int err = errno;
    return Error{"socket path '" + path +
                     "' is not usable (cannot open its directory: " + std::strerror(err) + ")",
                 err};
  }
  std::snprintf(address.addr_.sun_path, sizeof address.addr_.sun_path, "/proc/thread-self/fd/%d/%s",
                address.dir_.get(), name.c_str());
  return address;
}

}  // namespace egpu::protocol
