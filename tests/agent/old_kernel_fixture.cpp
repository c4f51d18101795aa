// A test fixture preloaded into the agent: a kernel before Linux 6.5, so
// tests reach the agent's own ways round on any kernel. It has no
// SO_PASSRIGHTS (6.16: setsockopt answers ENOPROTOOPT), so the agent
// handles descriptors clients pass it, and no SO_PEERPIDFD (6.5: getsockopt
// answers ENOPROTOOPT), so the agent watches attached processes by pid.
#include <dlfcn.h>
#include <sys/socket.h>

#include <cerrno>

namespace {

constexpr int kPassRights = 83;  // asm-generic SO_PASSRIGHTS
constexpr int kPeerPidfd = 77;   // asm-generic SO_PEERPIDFD

template <typename Fn>
Fn next_symbol(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int setsockopt(int fd, int level, int name,
                                                                 const void* value,
                                                                 socklen_t length) {
  if (level == SOL_SOCKET && name == kPassRights) {
    errno = ENOPROTOOPT;
    return -1;
  }
  using Fn = int (*)(int, int, int, const void*, socklen_t);
  static Fn next = next_symbol<Fn>("setsockopt");
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return next(fd, level, name, value, length);
}

extern "C" __attribute__((visibility("default"))) int getsockopt(int fd, int level, int name,
                                                                 void* value, socklen_t* length) {
  if (level == SOL_SOCKET && name == kPeerPidfd) {
    errno = ENOPROTOOPT;
    return -1;
  }
  using Fn = int (*)(int, int, int, void*, socklen_t*);
  static Fn next = next_symbol<Fn>("getsockopt");
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return next(fd, level, name, value, length);
}
