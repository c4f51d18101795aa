#include "stop_signal.h"

#include <signal.h>

#include <atomic>

namespace egpu::workload {

namespace {

std::atomic<int> g_stop_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs a lock-free flag");

void on_stop_signal(int signal_number) {
  g_stop_signal.store(signal_number);
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

bool stop_requested() {
  return g_stop_signal.load(std::memory_order_relaxed) != 0;
}

int stop_signal_number() {
  return g_stop_signal.load();
}

}  // namespace egpu::workload
