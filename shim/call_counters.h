// Per-wrapper call counters, on only with EGPU_DEBUG=1: they prove which
// wrapper a program reached (tests read them through the exported
// egpu_shim_wrapper_calls). Off, a wrapper pays one relaxed load.
#pragma once

#include <atomic>
#include <cstdint>

#include "shim/real_functions.h"

namespace egpu::shim {

namespace detail {
extern std::atomic<bool> g_count_calls;
void count_call(RealId id);
}  // namespace detail

void set_call_counting(bool on);

inline void note_call(RealId id) {
  if (detail::g_count_calls.load(std::memory_order_relaxed)) detail::count_call(id);
}

}  // namespace egpu::shim

extern "C" {
// Calls of the wrapper exported as `abi_name` so far (0 when counting is off).
__attribute__((visibility("default"))) uint64_t egpu_shim_wrapper_calls(const char* abi_name);
}
