#include "shim/context_limits.h"

#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "shim/after_fork.h"
#include "shim/context_devices.h"
#include "shim/fork_renewed.h"
#include "shim/memory_accounting.h"

namespace egpu::shim {
namespace {

bool costs_memory(CUlimit limit) {
  return limit == CU_LIMIT_MALLOC_HEAP_SIZE || limit == CU_LIMIT_PRINTF_FIFO_SIZE ||
         limit == CU_LIMIT_STACK_SIZE;
}

struct Raised {
  uint64_t baseline = 0;  // the driver's cost before the context first raised it
  uint64_t accounted = 0;
  int ordinal = 0;
  bool primary = false;
};

// (context, limit) -> what is accounted for it. The AllocationTable holds the
// same bytes (kContextLimit, keyed by key_of) so a re-attach counts them.
struct Ledger {
  std::mutex mu;
  std::map<std::pair<CUcontext, int>, Raised> raised;
};

Ledger* make_ledger() {
  return new Ledger();
}
// Never destroyed: wrappers may run during exit.
constinit ForkRenewed<Ledger, &make_ledger> g_ledger;

Ledger& ledger() {
  return g_ledger.get();
}

uint64_t key_of(CUcontext ctx, CUlimit limit) {
  return (static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ctx)) << 4) |
         static_cast<uint64_t>(limit);
}

// Device bytes the driver allocates for `value` of `limit` on `dev`.
uint64_t cost_of(CUlimit limit, size_t value, CUdevice dev) {
  if (limit != CU_LIMIT_STACK_SIZE) return value;
  const auto attribute = EGPU_REAL(cuDeviceGetAttribute);
  int sms = 0, threads = 0;
  if (attribute == nullptr ||
      attribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) != CUDA_SUCCESS ||
      attribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, dev) !=
          CUDA_SUCCESS) {
    return 0;
  }
  return static_cast<uint64_t>(value) * static_cast<uint64_t>(sms) * static_cast<uint64_t>(threads);
}

bool is_primary(CUcontext ctx, CUdevice dev) {
  return ctx != nullptr && active_primary(dev) == ctx;
}

void give_back(ProcessState& s, CUcontext ctx, CUlimit limit, uint64_t bytes) {
  auto entry = s.allocations().take(AllocationKind::kContextLimit, key_of(ctx, limit));
  if (!entry) return;
  const uint64_t back = std::min(bytes, entry->bytes);
  release_allocation(s, LiveAllocation{back, entry->ordinal});
  entry->bytes -= back;
  if (entry->bytes > 0)
    s.allocations().insert(AllocationKind::kContextLimit, key_of(ctx, limit), *entry);
}

template <typename Match>
void release_matching(Match&& match) noexcept {
  ProcessState* s = managed_state();
  if (s == nullptr) return;
  try {
    std::vector<std::pair<CUcontext, int>> gone;
    {
      std::lock_guard lock(ledger().mu);
      for (auto it = ledger().raised.begin(); it != ledger().raised.end();) {
        if (match(it->first.first, it->second)) {
          gone.push_back(it->first);
          it = ledger().raised.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const auto& [ctx, limit] : gone) {
      give_back(*s, ctx, static_cast<CUlimit>(limit), UINT64_MAX);
    }
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error while releasing context limits");
  }
}

CUresult set_limit(CUlimit limit, size_t value) noexcept {
  const auto real = EGPU_REAL(cuCtxSetLimit);
  if (real == nullptr) return missing_real_result();
  ProcessState* s = managed_state();
  note_call(RealId::cuCtxSetLimit);
  if (s == nullptr || !costs_memory(limit)) return real(limit, value);
  bool called = false;
  CUresult result = CUDA_ERROR_UNKNOWN;
  try {
    const auto get_current = EGPU_REAL(cuCtxGetCurrent);
    const auto get_device = EGPU_REAL(cuCtxGetDevice);
    const auto get_limit = EGPU_REAL(cuCtxGetLimit);
    CUcontext ctx = nullptr;
    CUdevice dev = 0;
    size_t before = 0;
    GpuBinding* b = nullptr;
    if (get_current != nullptr && get_device != nullptr && get_limit != nullptr &&
        get_current(&ctx) == CUDA_SUCCESS && ctx != nullptr && get_device(&dev) == CUDA_SUCCESS &&
        get_limit(&before, limit) == CUDA_SUCCESS) {
      b = s->binding(dev);
    }
    if (b == nullptr) {
      called = true;
      return result = real(limit, value);
    }
    Raised r;
    {
      std::lock_guard lock(ledger().mu);
      const auto it = ledger().raised.find({ctx, limit});
      if (it != ledger().raised.end())
        r = it->second;
      else
        r = Raised{cost_of(limit, before, dev), 0, dev, is_primary(ctx, dev)};
    }
    const uint64_t cost = cost_of(limit, value, dev);
    const uint64_t wanted = cost > r.baseline ? cost - r.baseline : 0;
    Reservation more;
    if (wanted > r.accounted &&
        reserve_memory(*s, *b, wanted - r.accounted, &more) == Admission::kDenied) {
      return CUDA_ERROR_OUT_OF_MEMORY;  // the driver never sees it
    }
    called = true;
    result = real(limit, value);
    if (result != CUDA_SUCCESS) {
      cancel_reservation(more);
      return result;
    }
    if (more.bytes > 0) {
      auto entry = s->allocations().take(AllocationKind::kContextLimit, key_of(ctx, limit));
      LiveAllocation updated = entry.value_or(LiveAllocation{0, more.ordinal});
      updated.bytes += more.bytes;
      s->allocations().insert(AllocationKind::kContextLimit, key_of(ctx, limit), updated);
    } else if (wanted < r.accounted) {
      give_back(*s, ctx, limit, r.accounted - wanted);
    }
    r.accounted = wanted;
    std::lock_guard lock(ledger().mu);
    ledger().raised[{ctx, limit}] = r;
    return result;
  } catch (...) {
    EGPU_SHIM_LOG_ONCE("internal error in cuCtxSetLimit: passing it through unaccounted");
    return called ? result : real(limit, value);
  }
}

}  // namespace

void renew_context_limits_after_fork() noexcept {
  g_ledger.renew();
}

void release_context_limits(CUcontext ctx) noexcept {
  release_matching([ctx](CUcontext c, const Raised&) { return c == ctx; });
}

void release_primary_limits(int ordinal, bool reset) noexcept {
  if (!reset) {
    // A release destroys the primary only when it was the last reference.
    const auto state = EGPU_REAL(cuDevicePrimaryCtxGetState);
    unsigned int flags = 0;
    int active = 1;
    if (state == nullptr || state(ordinal, &flags, &active) != CUDA_SUCCESS || active != 0) return;
  }
  release_matching(
      [ordinal](CUcontext, const Raised& r) { return r.primary && r.ordinal == ordinal; });
}

}  // namespace egpu::shim

extern "C" {

CUresult CUDAAPI cuCtxSetLimit(CUlimit limit, size_t value) {
  return egpu::shim::set_limit(limit, value);
}

}  // extern "C"
