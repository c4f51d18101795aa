#include "model/process_identity.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

namespace egpu::simgpu {
namespace {

struct StatFields {
  bool found = false;
  char state = '?';
  uint64_t start_time = 0;
};

// Reads state (field 3) and starttime (field 22) of /proc/<pid>/stat. The
// comm field may hold spaces and parentheses, so parsing starts after the
// last ')'.
StatFields read_stat(int pid) {
  StatFields out;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return out;
  char buf[1024];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return out;
  buf[n] = '\0';
  const std::string_view text(buf, static_cast<size_t>(n));
  const size_t paren = text.rfind(')');
  if (paren == std::string_view::npos || paren + 2 >= text.size()) return out;
  out.found = true;
  out.state = text[paren + 2];
  // Fields after the state: field 4 onwards; starttime is the 19th of them.
  const char* p = buf + paren + 3;
  for (int field = 4; field < 22 && *p != '\0'; ++field) {
    while (*p != '\0' && *p != ' ')
      ++p;
    while (*p == ' ')
      ++p;
  }
  out.start_time = std::strtoull(p, nullptr, 10);
  return out;
}

bool proc_usable() {
  static const bool usable = read_stat(static_cast<int>(::getpid())).found;
  return usable;
}

}  // namespace

namespace {
std::atomic<int32_t> g_pid{0};
}  // namespace

int32_t current_pid() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { g_pid.store(0, std::memory_order_relaxed); });
    return true;
  }();
  (void)registered;
  int32_t pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<int32_t>(::getpid());
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

ProcessIdentity self_identity() {
  ProcessIdentity id{};
  id.pid = static_cast<int32_t>(::getpid());
  id.start_time = read_stat(id.pid).start_time;
  return id;
}

bool process_alive(const ProcessIdentity& who) {
  if (who.pid <= 0) return false;
  if (proc_usable()) {
    const StatFields st = read_stat(who.pid);
    if (!st.found) return false;
    if (st.state == 'Z' || st.state == 'X' || st.state == 'x') return false;
    return who.start_time == 0 || st.start_time == who.start_time;
  }
  return ::kill(who.pid, 0) == 0 || errno == EPERM;
}

std::string process_label() {
  if (const char* label = std::getenv("SIMGPU_LABEL"); label != nullptr && *label != '\0') {
    return label;
  }
  char comm[64] = {};
  const int fd = ::open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    const ssize_t n = ::read(fd, comm, sizeof comm - 1);
    ::close(fd);
    if (n > 0) {
      comm[n] = '\0';
      if (char* nl = std::strchr(comm, '\n')) *nl = '\0';
      return comm;
    }
  }
  return "pid-" + std::to_string(::getpid());
}

uint64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace egpu::simgpu
