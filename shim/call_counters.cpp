#include "shim/call_counters.h"

#include <cstring>

#include "shim/log.h"

namespace egpu::shim {
namespace detail {
constinit std::atomic<bool> g_count_calls{false};
}  // namespace detail

namespace {
constinit std::atomic<uint64_t> g_calls[kWrappedCount] = {};
}  // namespace

void set_call_counting(bool on) {
  detail::g_count_calls.store(on, std::memory_order_relaxed);
}

void detail::count_call(RealId id) {
  const int i = static_cast<int>(id);
  if (i < 0 || i >= kWrappedCount) return;
  if (g_calls[i].fetch_add(1, std::memory_order_relaxed) == 0) {
    log_debug("first call of the %s wrapper", real_name(id));
  }
}

}  // namespace egpu::shim

uint64_t egpu_shim_wrapper_calls(const char* abi_name) {
  if (abi_name == nullptr) return 0;
  for (int i = 0; i < egpu::shim::kWrappedCount; ++i) {
    if (std::strcmp(egpu::shim::real_name(static_cast<egpu::shim::RealId>(i)), abi_name) == 0) {
      return egpu::shim::g_calls[i].load(std::memory_order_relaxed);
    }
  }
  return 0;
}
