// What a forked child of a shimmed process starts afresh. Only the forking
// thread exists in a child: a lock another thread of the parent held at the
// fork stays held there for ever, and this thread's thread-locals name the
// parent's pacers. A child is a new process to the agent besides (its own
// slot, its own memory). fork_guard.cpp calls these from its pthread_atfork
// child handler: none may take a lock or allocate. The old objects are
// never freed (another thread's copy of them is gone, not finished with).
#pragma once

namespace egpu::shim {

// This thread's per-thread default streams belong to the parent's pacers:
// forgotten, so the thread's exit does not retire them there.
void forget_thread_streams_after_fork() noexcept;
// The table of open IPC pointers (memory_import_wrappers.cpp), the raised
// context limits (context_limits.cpp) and the open stream captures
// (capture_wrappers.cpp) begin empty: the driver carries none of them into a
// child, and their mutexes may be held.
void renew_ipc_opens_after_fork() noexcept;
void renew_context_limits_after_fork() noexcept;
void renew_capture_state_after_fork() noexcept;

// The symbol tables (wrapped_symbols.cpp) are built once by whichever thread
// first needs them: one a thread of the parent was building is built again.
void reset_symbol_tables_after_fork() noexcept;

}  // namespace egpu::shim
