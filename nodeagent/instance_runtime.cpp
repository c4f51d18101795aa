#include "nodeagent/instance_runtime.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <new>

#include "core/quota/memory_quota.h"
#include "core/util/log.h"

namespace egpu::agent {
namespace {

// The most device time one process may report in one scan: the page is the
// job's, and its counters may jump anywhere (found by fuzz.instance_page).
constexpr uint64_t kMaxReportNs = 3'600'000'000'000;  // an hour

// Forward progress of a counter the job writes: never negative, bounded.
int64_t progress(uint64_t now, uint64_t seen) {
  return now > seen ? static_cast<int64_t>(std::min(now - seen, kMaxReportNs)) : 0;
}

}  // namespace

InstanceRuntime::InstanceRuntime(shm::PageFile page, std::string runtime_dir,
                                 model::Instance identity)
    : page_(std::move(page)),
      runtime_dir_(std::move(runtime_dir)),
      identity_(std::move(identity)),
      path_(page_path(runtime_dir_, identity_.id)) {}

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
  if (reopen && !valid) {
    // Its user can write, truncate or replace the contents of its own page;
    // dropping the instance for that would free its units to others and let
    // its processes run unattached. What the page said is lost, not the instance.
    EGPU_LOG_WARN("%s is not the page of instance %llu any more; starting it afresh", path.c_str(),
                  static_cast<unsigned long long>(instance.id));
  }
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
  auto guard = UserPageGuard::watch(file->mapping.get(), file->mapping.size());
  if (!guard) return Error{path + ": " + guard.error()};
  InstanceRuntime rt(std::move(*file), runtime_dir, instance);
  rt.guard_ = std::move(*guard);
  // Start from what the shims already reported: nothing is charged twice.
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    rt.seen_device_ns_[i] = page->procs[i].device_ns.load(std::memory_order_acquire);
    rt.seen_launches_[i] = page->procs[i].launches.load(std::memory_order_acquire);
    // After a restart the recovery checks each of these and reclaims the dead.
    if (page->procs[i].pid.load(std::memory_order_acquire) != 0) rt.attached_.set(i);
  }
  return rt;
}

void InstanceRuntime::repair_if_broken() {
  if (!guard_.broken()) return;
  auto fresh = open(runtime_dir_, identity_, /*reopen=*/false);
  if (!fresh) {
    // Tried again at the next look; meanwhile the page reads as zeros.
    EGPU_LOG_WARN("instance %llu: its user truncated its page, which cannot be replaced: %s",
                  static_cast<unsigned long long>(identity_.id), fresh.error().c_str());
    return;
  }
  const uint64_t total = device_ns_total_;
  const int64_t pending = pending_device_ns_;
  *this = std::move(*fresh);
  device_ns_total_ = total;
  pending_device_ns_ = pending;
  EGPU_LOG_WARN("instance %llu: its user truncated its page; the page was replaced",
                static_cast<unsigned long long>(identity_.id));
}

int InstanceRuntime::attach(pid_t pid) {
  repair_if_broken();
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
    attached_.set(i);
    return static_cast<int>(i);
  }
  return -1;
}

void InstanceRuntime::reclaim(uint32_t slot, pid_t pid) {
  if (slot >= shm::kMaxProcsPerInstance) return;
  auto& s = page()->procs[slot];
  if (s.pid.load(std::memory_order_acquire) != pid) return;
  const uint64_t dev = s.device_ns.load(std::memory_order_acquire);
  pending_device_ns_ = std::min<int64_t>(pending_device_ns_ + progress(dev, seen_device_ns_[slot]),
                                         static_cast<int64_t>(kMaxReportNs));
  seen_device_ns_[slot] = dev;
  // One store removes its memory from the instance's total (MemoryQuota sums
  // attached processes only); the driver freed that memory with the process.
  s.pid.store(0, std::memory_order_release);
  s.busy.store(0, std::memory_order_relaxed);
  attached_.reset(slot);
}

InstanceActivity InstanceRuntime::scan() {
  repair_if_broken();
  InstanceActivity a;
  a.device_ns = pending_device_ns_;
  pending_device_ns_ = 0;
  auto* p = page();
  // Only the slots the agent gave out: each is a cache line its process
  // writes, and a tick looks at every instance on the GPU.
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    if (!attached_.test(i)) continue;
    auto& s = p->procs[i];
    if (s.pid.load(std::memory_order_acquire) == 0) continue;
    ++a.processes;
    const uint64_t dev = s.device_ns.load(std::memory_order_acquire);
    // The page is writable by the job: take only forward progress, bounded
    // (64 processes x an hour cannot overflow the sum).
    a.device_ns += progress(dev, seen_device_ns_[i]);
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
  // Saturates: a counter (metrics, status) never goes backwards.
  device_ns_total_ += std::min(static_cast<uint64_t>(a.device_ns), UINT64_MAX - device_ns_total_);
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
  // The slots the agent handed out, not whatever the job wrote into its page.
  uint32_t n = 0;
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i)
    n += attached_.test(i) && page()->procs[i].pid.load(std::memory_order_relaxed) != 0 ? 1 : 0;
  return n;
}

slo::LatencyHistogram::Counts InstanceRuntime::latency_counts() const {
  slo::LatencyHistogram::Counts counts{};
  for (std::size_t i = 0; i < counts.size(); ++i)
    counts[i] = page()->latency_counts[i].load(std::memory_order_relaxed);
  return counts;
}

}  // namespace egpu::agent
