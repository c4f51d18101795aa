// A test fixture preloaded into the agent: a kernel before Linux 6.16, which
// has no SO_PASSRIGHTS (setsockopt answers ENOPROTOOPT), so tests reach the
// agent's own handling of descriptors clients pass it on any kernel.
#include <dlfcn.h>
#include <sys/socket.h>

#include <cerrno>

extern "C" __attribute__((visibility("default"))) int setsockopt(int fd, int level, int name,
                                                                 const void* value,
                                                                 socklen_t length) {
  constexpr int kPassRights = 83;  // asm-generic SO_PASSRIGHTS
  if (level == SOL_SOCKET && name == kPassRights) {
    errno = ENOPROTOOPT;
    return -1;
  }
  using Fn = int (*)(int, int, int, const void*, socklen_t);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "setsockopt"));
  if (next == nullptr) {
    errno = ENOSYS;
    return -1;
  }
  return next(fd, level, name, value, length);
}
