// Registers the shim's fork handlers (after_fork.h) as the library loads,
// before any thread of the program can be inside the shim.
#include <pthread.h>

#include <atomic>

#include "shim/after_fork.h"
#include "shim/agent_clock.h"
#include "shim/process_state.h"

namespace egpu::shim {
namespace {

// No locks here, and no allocation: the state is made again at the child's
// first call that needs it (process_state()).
void in_child() noexcept {
  detail::g_process_state.store(nullptr, std::memory_order_release);
  forget_thread_streams_after_fork();
  renew_ipc_opens_after_fork();
  renew_context_limits_after_fork();
  renew_capture_state_after_fork();
  reset_symbol_tables_after_fork();
  forget_time_offset_after_fork();
}

[[gnu::constructor]] void register_fork_handlers() {
  // Without them a fork is what it was before the shim handled it; nothing
  // to report to a program that may never fork.
  (void)pthread_atfork(nullptr, nullptr, &in_child);
}

}  // namespace
}  // namespace egpu::shim
