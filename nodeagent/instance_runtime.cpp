#include "nodeagent/instance_runtime.h"

#include <unistd.h>

#include <new>

#include "core/quota/memory_quota.h"

namespace egpu::agent {

InstanceRuntime::InstanceRuntime(shm::PageFile page, std::string path)
    : page_(std::move(page)), path_(std::move(path)) {}

std::string InstanceRuntime::page_path(const std::string& runtime_dir, uint64_t instance_id) {
  return runtime_dir + "/instance-" + std::to_string(instance_id);
}

Result<InstanceRuntime> InstanceRuntime::open(const std::string& runtime_dir,
                                              const model::Instance& instance, bool reopen) {
  const std::string path = page_path(runtime_dir, instance.id);
  if (!reopen) ::unlink(path.c_str());  // a stale page of a reused id must not leak state
  auto file =
      shm::open_page_file(path, sizeof(shm::InstancePage), instance.uid, instance.gid, 0600);
  if (!file) return Error{file.error()};
  auto* page = file->mapping.as<shm::InstancePage>();
  const bool valid = !file->created && page->magic == shm::kInstancePageMagic &&
                     page->version == shm::kLayoutVersion && page->instance_id == instance.id;
  if (reopen && !valid)
    return Error{path + " is not the page of instance " + std::to_string(instance.id)};
  if (!valid) {
    new (page) shm::InstancePage();
    page->instance_id = instance.id;
    page->gpu_index = instance.gpu;
    page->gpu_slot = instance.slot;
    if (!quota::init_instance_lock(page)) return Error{"cannot initialise the lock of " + path};
    page->version = shm::kLayoutVersion;
    std::atomic_thread_fence(std::memory_order_release);
    page->magic = shm::kInstancePageMagic;
  }
  InstanceRuntime rt(std::move(*file), path);
  // Start from what the shims already reported: nothing is charged twice.
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    rt.seen_device_ns_[i] = page->procs[i].device_ns.load(std::memory_order_acquire);
    rt.seen_launches_[i] = page->procs[i].launches.load(std::memory_order_acquire);
  }
  return rt;
}

int InstanceRuntime::attach(pid_t pid) {
  auto* p = page();
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    if (p->procs[i].pid.load(std::memory_order_acquire) == pid) return static_cast<int>(i);
  }
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    auto& slot = p->procs[i];
    if (slot.pid.load(std::memory_order_acquire) != 0) continue;
    slot.busy.store(0, std::memory_order_relaxed);
    slot.launches.store(0, std::memory_order_relaxed);
    slot.device_ns.store(0, std::memory_order_relaxed);
    slot.mem_bytes.store(0, std::memory_order_relaxed);
    slot.throttled_ns.store(0, std::memory_order_relaxed);
    slot.inflight_ns.store(0, std::memory_order_relaxed);
    slot.mem_denied.store(0, std::memory_order_relaxed);
    slot.idle_since_ns.store(0, std::memory_order_relaxed);
    seen_device_ns_[i] = 0;
    seen_launches_[i] = 0;
    slot.pid.store(pid, std::memory_order_release);
    return static_cast<int>(i);
  }
  return -1;
}

void InstanceRuntime::reclaim(uint32_t slot, pid_t pid) {
  if (slot >= shm::kMaxProcsPerInstance) return;
  auto& s = page()->procs[slot];
  if (s.pid.load(std::memory_order_acquire) != pid) return;
  const uint64_t dev = s.device_ns.load(std::memory_order_acquire);
  if (dev > seen_device_ns_[slot])
    pending_device_ns_ += static_cast<int64_t>(dev - seen_device_ns_[slot]);
  seen_device_ns_[slot] = dev;
  // One store removes its memory from the instance's total (MemoryQuota sums
  // attached processes only); the driver freed that memory with the process.
  s.pid.store(0, std::memory_order_release);
  s.busy.store(0, std::memory_order_relaxed);
}

InstanceActivity InstanceRuntime::scan() {
  InstanceActivity a;
  a.device_ns = pending_device_ns_;
  pending_device_ns_ = 0;
  auto* p = page();
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    auto& s = p->procs[i];
    if (s.pid.load(std::memory_order_acquire) == 0) continue;
    ++a.processes;
    const uint64_t dev = s.device_ns.load(std::memory_order_acquire);
    // The page is writable by the job: take only forward progress.
    if (dev > seen_device_ns_[i]) a.device_ns += static_cast<int64_t>(dev - seen_device_ns_[i]);
    seen_device_ns_[i] = dev;
    const uint64_t launches = s.launches.load(std::memory_order_acquire);
    if (launches != seen_launches_[i]) a.launched = true;
    seen_launches_[i] = launches;
    const uint32_t busy = std::min<uint32_t>(s.busy.load(std::memory_order_acquire), 1024);
    a.busy += busy;
    // Bounded: the value comes from a page the job can write.
    const auto inflight = static_cast<int64_t>(
        std::min<uint64_t>(s.inflight_ns.load(std::memory_order_relaxed), 1'000'000'000));
    a.inflight_ns += inflight;
    if (busy > 0) a.reported_inflight_ns += inflight;
    a.idle_since_ns = std::max(a.idle_since_ns, s.idle_since_ns.load(std::memory_order_relaxed));
  }
  device_ns_total_ += static_cast<uint64_t>(a.device_ns);
  return a;
}

uint64_t InstanceRuntime::memory_used() const {
  return quota::used(page());
}

uint64_t InstanceRuntime::throttled_ns() const {
  uint64_t total = 0;
  for (const auto& s : page()->procs)
    total += s.throttled_ns.load(std::memory_order_relaxed);
  return total;
}

uint64_t InstanceRuntime::mem_denied() const {
  uint64_t total = 0;
  for (const auto& s : page()->procs)
    total += s.mem_denied.load(std::memory_order_relaxed);
  return total;
}

uint32_t InstanceRuntime::processes() const {
  uint32_t n = 0;
  for (const auto& s : page()->procs)
    n += s.pid.load(std::memory_order_relaxed) != 0 ? 1 : 0;
  return n;
}

}  // namespace egpu::agent
