#include "nodeagent/user_page_guard.h"

#include <signal.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace egpu::agent {
namespace {

// Lock-free, because the signal handler reads it: an entry is claimed with
// `in_use`, then its range is published; `begin == 0` means not watched.
struct Entry {
  std::atomic<bool> in_use{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> broken{false};
};

std::array<Entry, UserPageGuard::kMaxWatched> g_entries;
std::atomic<bool> g_installed{false};
struct sigaction g_previous {};

// Puts zeroed memory in place of a watched mapping that faulted; true if
// `addr` was in one.
bool replace_watched(uintptr_t addr) {
  for (auto& e : g_entries) {
    const uintptr_t begin = e.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin) continue;
    const uintptr_t end = e.end.load(std::memory_order_acquire);
    if (addr >= end) continue;
    void* r = ::mmap(reinterpret_cast<void*>(begin), end - begin, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (r == MAP_FAILED) return false;
    e.broken.store(true, std::memory_order_release);
    return true;
  }
  return false;
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  const int saved_errno = errno;
  if (info != nullptr && replace_watched(reinterpret_cast<uintptr_t>(info->si_addr))) {
    errno = saved_errno;
    return;  // the access is retried on the zeroed memory
  }
  errno = saved_errno;
  // Not a page of a job: whatever handled SIGBUS before us does (a sanitizer's
  // report), else the default action once the access faults again.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  (void)::sigaction(SIGBUS, &dfl, nullptr);
}

}  // namespace

Status UserPageGuard::install() {
  if (g_installed.exchange(true)) return {};
  struct sigaction sa {};
  sa.sa_sigaction = &on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGBUS, &sa, &g_previous) != 0) {
    g_installed.store(false);
    return Error{std::string("cannot install the SIGBUS handler: ") + std::strerror(errno)};
  }
  return {};
}

Result<UserPageGuard> UserPageGuard::watch(void* addr, size_t length) {
  for (int i = 0; i < kMaxWatched; ++i) {
    Entry& e = g_entries[static_cast<size_t>(i)];
    if (e.in_use.exchange(true, std::memory_order_acq_rel)) continue;
    e.broken.store(false, std::memory_order_relaxed);
    e.end.store(reinterpret_cast<uintptr_t>(addr) + length, std::memory_order_relaxed);
    e.begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    return UserPageGuard(i);
  }
  return Error{"more than " + std::to_string(kMaxWatched) + " pages of jobs are mapped"};
}

UserPageGuard& UserPageGuard::operator=(UserPageGuard&& o) noexcept {
  if (this != &o) {
    release();
    entry_ = o.entry_;
    o.entry_ = -1;
  }
  return *this;
}

bool UserPageGuard::broken() const {
  return entry_ >= 0 &&
         g_entries[static_cast<size_t>(entry_)].broken.load(std::memory_order_acquire);
}

void UserPageGuard::release() {
  if (entry_ < 0) return;
  Entry& e = g_entries[static_cast<size_t>(entry_)];
  e.begin.store(0, std::memory_order_release);
  e.end.store(0, std::memory_order_relaxed);
  e.in_use.store(false, std::memory_order_release);
  entry_ = -1;
}

}  // namespace egpu::agent
