// Who owns a context, and whether that process still lives. Liveness reads
// /proc/<pid>/stat: a zombie (killed but not yet reaped) counts as dead, and
// a different start time means the pid was reused. Without /proc it falls
// back to kill(pid, 0).
#pragma once

#include <cstdint>
#include <string>

#include "model/layout.h"

namespace egpu::simgpu {

ProcessIdentity self_identity();

// getpid() without the syscall: glibc no longer caches it, and the device lock
// takes it on every launch (its cost, ~100 ns and noisy on a VM, sat in the
// baseline of every shim overhead measurement). Reset in a forked child.
int32_t current_pid();

bool process_alive(const ProcessIdentity& who);

// SIMGPU_LABEL if set, else the process's comm name.
std::string process_label();

uint64_t monotonic_ns();

}  // namespace egpu::simgpu
