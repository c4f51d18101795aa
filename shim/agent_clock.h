// The agent's CLOCK_MONOTONIC, as this process reads it. In a time namespace
// (unshare --time, a CRIU restore, some container runtimes) a process reads
// CLOCK_MONOTONIC shifted by its namespace's offset, while the agent beats
// the GPU page and judges idle times on the initial namespace's clock: with
// the shift, a live agent looked dead (or a dead one alive) to the shim.
// What the shim compares with, or writes for, the agent's clock goes
// through this; its own durations need not.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace egpu::shim {

// The monotonic clock's offset in /proc/self/timens_offsets text ("monotonic
// <s> <ns>" lines; clock id 1 on kernels that print numbers); nullopt when
// the text has no such line or a malformed one.
std::optional<int64_t> parse_monotonic_offset(std::string_view text);

// CLOCK_MONOTONIC less this process's time-namespace offset (read once; 0
// where the file is absent: no time namespaces). Assumes the agent runs in
// the initial time namespace.
int64_t agent_clock_ns();

// A forked child may be in another namespace (unshare(CLONE_NEWTIME) puts
// the children made after it there): read again at its next use. For the
// fork handler: no lock, no allocation.
void forget_time_offset_after_fork() noexcept;

}  // namespace egpu::shim
