#include "shim/log.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <ctime>

#include "core/util/clock.h"

namespace egpu::shim {
namespace {

std::atomic<bool> g_debug{false};

// At most kBurst lines, refilled at one line per kRefillNs.
constexpr int64_t kBurst = 50;
constexpr int64_t kRefillNs = 100'000'000;
std::atomic<int64_t> g_budget_start_ns{0};  // the time at which the budget was 0

bool take_budget() {
  const int64_t now = monotonic_ns();
  int64_t start = g_budget_start_ns.load(std::memory_order_relaxed);
  for (;;) {
    // Budget available = (now - start) / refill, at most kBurst.
    const int64_t floor = now - kBurst * kRefillNs;
    const int64_t effective = start < floor ? floor : start;
    if (now - effective < kRefillNs) return false;
    if (g_budget_start_ns.compare_exchange_weak(start, effective + kRefillNs,
                                                std::memory_order_relaxed)) {
      return true;
    }
  }
}

// Writes to stderr as the program's own: a stderr whose reader is gone (a
// closed pipe) must not raise SIGPIPE in a program that never writes there
// itself, and the program's errno is left as it was. SIGPIPE is held off
// for this thread meanwhile, and one the write raised is taken back (not
// one that was pending already).
void write_quietly(const char* line, size_t size) {
  const int saved_errno = errno;
  sigset_t pipe_only;
  sigset_t before;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t pending;
  const bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE) == 1;
  const bool masked = pthread_sigmask(SIG_BLOCK, &pipe_only, &before) == 0;
  const ssize_t written = ::write(STDERR_FILENO, line, size);
  if (masked) {
    if (written < 0 && errno == EPIPE && !was_pending) {
      const timespec now{};
      while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &before, nullptr);
  }
  errno = saved_errno;
}

void vwrite(const char* format, va_list args) {
  char line[1024];
  int n = std::snprintf(line, sizeof line, "egpu-shim[%d]: ", static_cast<int>(::getpid()));
  if (n < 0) return;
  // Room for the text and the newline that ends it.
  const size_t cap = sizeof line - 1;
  size_t used = std::min(static_cast<size_t>(n), cap - 1);
  const int m = std::vsnprintf(line + used, cap - used, format, args);
  if (m > 0) used += std::min(static_cast<size_t>(m), cap - used - 1);
  line[used++] = '\n';
  write_quietly(line, used);
}

}  // namespace

void set_debug_logging(bool on) {
  g_debug.store(on, std::memory_order_relaxed);
}
bool debug_logging() {
  return g_debug.load(std::memory_order_relaxed);
}

void log_line(const char* format, ...) {
  if (!take_budget()) return;
  va_list args;
  va_start(args, format);
  vwrite(format, args);
  va_end(args);
}

void log_debug(const char* format, ...) {
  if (!debug_logging()) return;
  va_list args;
  va_start(args, format);
  vwrite(format, args);
  va_end(args);
}

}  // namespace egpu::shim
