// ProcessState: the shim's state for this process, created at the first CUDA
// call (nothing happens at load time) and never destroyed (wrappers may run
// during exit). A forked child replaces it with a fresh one without taking any
// lock: it attaches as its own process at its next CUDA call.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "shim/allocation_table.h"
#include "shim/context_devices.h"
#include "shim/cuda_event_backend.h"
#include "shim/gpu_binding.h"
#include "shim/graph_exec_table.h"
#include "shim/mem_pool_table.h"
#include "shim/shim_env.h"
#include "shim/vmm_mappings.h"

namespace egpu::shim {

class ProcessState {
 public:
  explicit ProcessState(ShimEnv env);
  ProcessState(const ProcessState&) = delete;
  ProcessState& operator=(const ProcessState&) = delete;

  const ShimEnv& env() const { return env_; }
  // Managed, with a usable environment: the wrappers enforce.
  bool usable() const { return usable_; }
  // FailMode=closed: a process that is not attached (agent absent, attach
  // refused) does not reach the GPU: its launches and allocations are refused.
  bool refuses_unattached() const { return env_.fail_mode == FailMode::kClosed; }

  // The binding of CUDA ordinal `ordinal`; null when that device is not managed.
  GpuBinding* binding(int ordinal) {
    return ordinal >= 0 && static_cast<size_t>(ordinal) < bindings_.size()
               ? bindings_[static_cast<size_t>(ordinal)].get()
               : nullptr;
  }
  // The binding of the calling thread's current device.
  GpuBinding* current_binding() {
    if (bindings_.size() == 1) return bindings_[0].get();
    return binding(contexts_.current_ordinal());
  }

  // Where a latency the program reports goes: the calling thread's device
  // if attached, else the first attached one (a server may report from a
  // thread that never made a context current); null if none is attached.
  GpuBinding* reporting_binding() {
    if (GpuBinding* b = current_binding(); b != nullptr && b->attachment() != nullptr) return b;
    for (const auto& b : bindings_) {
      if (b->attachment() != nullptr) return b.get();
    }
    return nullptr;
  }

  AllocationTable& allocations() { return allocations_; }
  GraphExecTable& graph_execs() { return graph_execs_; }
  MemPoolTable& mem_pools() { return mem_pools_; }
  VmmMappings& vmm() { return vmm_; }
  ContextDevices& contexts() { return contexts_; }

  // cuInit: attach every managed GPU (once per process).
  void attach_all();
  // The binding's attachment, attaching first if that was never tried or a
  // retry is due; null when unattached (the fail mode applies).
  Attachment* ensure_attached(GpuBinding& b, int64_t now) {
    Attachment* a = b.attachment();
    return a != nullptr ? a : attach_slow(b, now, nullptr);
  }
  // The agent restarted or stopped: a new attachment if one can be had now
  // (rate-limited), otherwise `stale`.
  Attachment* reattach(GpuBinding& b, Attachment* stale, int64_t now) {
    return attach_slow(b, now, stale);
  }

 private:
  Attachment* attach_slow(GpuBinding& b, int64_t now, Attachment* stale);
  Attachment* attach_locked(GpuBinding& b, int64_t now, bool again);
  // attach_all: the agent did not answer for `stalled`; `b` is not tried
  // now but with it, later.
  void skip_attach(GpuBinding& b, const GpuBinding& stalled);

  const ShimEnv env_;
  const bool usable_;
  CudaEventBackend backend_;
  std::vector<std::unique_ptr<GpuBinding>> bindings_;
  AllocationTable allocations_;
  GraphExecTable graph_execs_;
  MemPoolTable mem_pools_;
  VmmMappings vmm_;
  ContextDevices contexts_;
  std::atomic<bool> attached_all_{false};
};

namespace detail {
extern std::atomic<ProcessState*> g_process_state;
ProcessState* create_process_state();
}  // namespace detail

// The process's state (created at first use); null only if it cannot be made.
inline ProcessState* process_state() {
  ProcessState* s = detail::g_process_state.load(std::memory_order_acquire);
  return s != nullptr ? s : detail::create_process_state();
}
// The state when the shim enforces, null when it passes through: the first
// test of every wrapper.
inline ProcessState* managed_state() {
  ProcessState* s = process_state();
  return s != nullptr && s->usable() ? s : nullptr;
}

}  // namespace egpu::shim
