#include "nodeagent/gpu_arbiter.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>

#include "core/shm/gpu_page_io.h"
#include "core/shm/grant_futex.h"
#include "core/shm/page_paths.h"
#include "core/shm/proc_slot_io.h"
#include "core/shm/slot_control_io.h"
#include "core/util/clock.h"
#include "core/util/log.h"
#include "nodeagent/page_chores.h"

namespace egpu::agent {
namespace {

// An instance page's name goes on a chore worker: unlink takes the file's
// lock, which its user can hold (see PageChores). Where no chore can be
// queued the file stays, and the next agent's start removes it.
void unlink_elsewhere(const InstanceRuntime& runtime, uid_t uid) {
  const int copy = ::fcntl(runtime.fd(), F_DUPFD_CLOEXEC, 0);
  if (copy >= 0)
    (void)PageChores::unlink_page(uid, copy, sizeof(shm::InstancePage), runtime.path(),
                                  runtime.dir());
}

}  // namespace

GpuArbiter::GpuArbiter(uint32_t gpu, uint64_t memory, const ArbiterSettings& settings,
                       GpuPages pages, faa::ArbiterPolicy policy, UsageLedger ledger)
    : gpu_(gpu),
      memory_bytes_(memory),
      settings_(settings),
      pages_(std::move(pages)),
      policy_(std::move(policy)),
      ledger_(std::move(ledger)) {}

GpuArbiter::~GpuArbiter() = default;

Result<std::unique_ptr<GpuArbiter>> GpuArbiter::open(uint32_t gpu, uint64_t memory_bytes,
                                                     const ArbiterSettings& settings,
                                                     std::vector<model::Instance>* recovered) {
  auto pages = GpuPages::open(settings.runtime_dir, gpu, settings.max_slots, recovered);
  if (!pages) return Error{pages.error()};
  shm::GpuPage* page = pages->page();
  page->gpu_memory_bytes = memory_bytes;
  page->heartbeat_timeout_ns.store(settings.heartbeat_timeout_ns);
  page->inflight_limit_ns.store(settings.policy.inflight_limit_ns);
  page->handover_tail_ns.store(settings.policy.handover_tail_ns);
  page->fail_mode.store(fail_mode_value(settings.fail_mode));
  page->heartbeat_ns.store(monotonic_ns());
  page->agent_epoch.store(settings.epoch, std::memory_order_release);
  pages->publish_header();
  auto policy = faa::ArbiterPolicy::create(settings.policy, monotonic_ns());
  if (!policy.ok()) return Error{policy.error()};
  auto ledger = UsageLedger::open(settings.runtime_dir, gpu, settings.max_slots);
  if (!ledger) return Error{ledger.error()};
  std::unique_ptr<GpuArbiter> arbiter(new GpuArbiter(gpu, memory_bytes, settings, std::move(*pages),
                                                     std::move(policy.value()),
                                                     std::move(*ledger)));
  arbiter->published_ = page->holder.load();
  if (arbiter->published_ != shm::kNoHolder) arbiter->policy_.restore_holder(arbiter->published_);
  const std::string path = shm::gpu_page_path(settings.runtime_dir, gpu);
  arbiter->readonly_fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!arbiter->readonly_fd_.valid()) return Error{"open " + path + ": " + std::strerror(errno)};
  return arbiter;
}

void GpuArbiter::publish_bound() {
  const int64_t bound = policy_.inflight_bound();
  if (writer().set_inflight_bound(bound)) {
    EGPU_LOG_DEBUG("GPU %u: in-flight bound %.1f ms", gpu_, bound / 1e6);
  }
}

void GpuArbiter::write_control(const model::Instance& inst) {
  shm::write_slot_control(pages_.record_page()->records[inst.slot], page()->slots[inst.slot], inst);
}

Status GpuArbiter::add(const model::Instance& instance, double target, uint64_t mem_limit,
                       bool reopen) {
  if (instance.slot >= settings_.max_slots || members_.contains(instance.slot)) {
    return Error{"slot " + std::to_string(instance.slot) + " of GPU " + std::to_string(gpu_) +
                 " is not free"};
  }
  auto runtime = InstanceRuntime::open(settings_.runtime_dir, instance, reopen);
  if (!runtime) return runtime.failure();
  auto channel = WakeChannel::create(instance.uid);
  if (!channel) {
    unlink_elsewhere(*runtime, instance.uid);
    return Error{channel.error()};
  }
  const int64_t now = monotonic_ns();
  if (Status s = policy_.join(instance.slot, target, instance.mode, now); !s.ok()) {
    unlink_elsewhere(*runtime, instance.uid);
    return Error{s.error()};
  }
  if (!reopen) shm::set_mem_limit(page()->slots[instance.slot], mem_limit);
  // Shims refuse a slot past the page's count (see open()).
  if (instance.slot >= page()->max_slots) page()->max_slots = settings_.max_slots;
  write_control(instance);
  if (reopen)
    ledger_.resume(instance.slot, instance.id, realtime_ns());
  else
    ledger_.begin(instance.slot, instance.id, realtime_ns());
  const uint32_t processes = runtime->processes();
  members_.emplace(instance.slot, Member{instance, std::move(*runtime), std::move(*channel),
                                         std::nullopt, accounting::UsageFold{}});
  slot_of_[instance.id] = instance.slot;
  policy_.set_processes(instance.slot, processes, now);
  publish_bound();
  // Waiters of the previous agent learn of the new epoch now, not at a timeout.
  if (reopen) wake(members_.at(instance.slot));
  return {};
}

void GpuArbiter::remove(uint64_t instance_id) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return;
  const uint32_t slot = it->second;
  policy_.leave(slot, monotonic_ns());
  shm::free_slot_control(pages_.record_page()->records[slot], page()->slots[slot]);
  if (published_ == slot) publish(std::nullopt, 0);
  auto m = members_.find(slot);
  if (m != members_.end()) {
    // Its waiters (processes that outlive the step) see at once that it is gone.
    wake(m->second);
    unlink_elsewhere(m->second.runtime, m->second.instance.uid);
    if (m->second.gang) --gangs_;
    members_.erase(m);
  }
  ledger_.end(slot);
  slot_of_.erase(it);
  publish_bound();
}

std::optional<accounting::StepUsage> GpuArbiter::finish(uint64_t instance_id) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return std::nullopt;
  // One more look: what its processes reported since the last tick (those
  // that exited included) is charged, then folded in.
  const int64_t now = monotonic_ns();
  (void)tick(now);
  fold_usage(it->second, members_.at(it->second), now);
  return usage_so_far(instance_id);
}

std::optional<accounting::StepUsage> GpuArbiter::usage_so_far(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return std::nullopt;
  accounting::StepUsage u;
  u.gpu = gpu_;
  u.units = members_.at(it->second).instance.units;
  u.totals = ledger_.totals(it->second);
  u.ended_unix_ns = realtime_ns();
  return u;
}

void GpuArbiter::fold_usage(uint32_t slot, Member& m, int64_t now) {
  auto stats = policy_.scheduler().stats(slot, now);
  if (!stats.ok()) return;
  m.usage.observe(ledger_.totals(slot), static_cast<uint64_t>(std::max<int64_t>(stats->charged, 0)),
                  static_cast<uint64_t>(std::max<int64_t>(stats->throttled, 0)),
                  m.runtime.memory_used(), memory_bytes_ != 0 ? memory_bytes_ : UINT64_MAX);
}

void GpuArbiter::update_control(const model::Instance& instance) {
  auto it = slot_of_.find(instance.id);
  if (it == slot_of_.end()) return;
  members_.at(it->second).instance = instance;
  write_control(instance);  // a new mode reaches the policy through retarget()
}

void GpuArbiter::publish_memory_limit(uint64_t instance_id, uint64_t limit) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return;
  shm::set_mem_limit(page()->slots[it->second], limit);
}

uint64_t GpuArbiter::memory_used(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  return it == slot_of_.end() ? 0 : members_.at(it->second).runtime.memory_used();
}

Status GpuArbiter::retarget(const std::map<uint64_t, std::pair<double, Mode>>& targets) {
  std::map<faa::InstanceId, std::pair<double, Mode>> by_slot;
  for (const auto& [id, target] : targets) {
    auto it = slot_of_.find(id);
    if (it != slot_of_.end()) by_slot[it->second] = target;
  }
  Status s = policy_.retarget(by_slot, monotonic_ns());
  publish_bound();
  return s;
}

void GpuArbiter::set_gang_windows(const std::map<uint64_t, faa::GangWindow>& windows) {
  gangs_ = 0;
  for (auto& [slot, m] : members_) {
    const auto w = windows.find(m.instance.id);
    std::optional<faa::GangWindow> next;
    if (w != windows.end()) next = w->second;
    if (next == m.gang) {
      gangs_ += m.gang ? 1 : 0;
      continue;
    }
    if (Status s = policy_.set_gang_window(slot, next); !s) {
      EGPU_LOG_WARN("GPU %u: instance %llu sliced on its own: %s", gpu_,
                    static_cast<unsigned long long>(m.instance.id), s.error().c_str());
      next.reset();
      (void)policy_.set_gang_window(slot, std::nullopt);
    }
    m.gang = next;
    gangs_ += m.gang ? 1 : 0;
  }
}

std::optional<faa::GangWindow> GpuArbiter::gang_window(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  return it == slot_of_.end() ? std::nullopt : members_.at(it->second).gang;
}

int GpuArbiter::attach(uint64_t instance_id, pid_t pid) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return -1;
  Member& m = members_.at(it->second);
  const int proc_slot = m.runtime.attach(pid);
  // A second job with processes: the holder's queue shrinks before this
  // process's first launch (a CUDA start-up takes far longer than 10 ms).
  policy_.set_processes(it->second, m.runtime.processes(), monotonic_ns());
  publish_bound();
  return proc_slot;
}

void GpuArbiter::reclaim(uint64_t instance_id, uint32_t proc_slot, pid_t pid) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return;
  Member& m = members_.at(it->second);
  m.runtime.reclaim(proc_slot, pid);
  policy_.set_processes(it->second, m.runtime.processes(), monotonic_ns());
  publish_bound();
}

pid_t GpuArbiter::process_in_slot(uint64_t instance_id, uint32_t proc_slot) const {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end() || proc_slot >= shm::kMaxProcsPerInstance) return 0;
  return members_.at(it->second).runtime.given_to(proc_slot);
}

int GpuArbiter::instance_page_fd(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  return it == slot_of_.end() ? -1 : members_.at(it->second).runtime.fd();
}

int GpuArbiter::wake_fd(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  return it == slot_of_.end() ? -1 : members_.at(it->second).wake.agent_fd();
}

int GpuArbiter::shim_wake_fd(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  return it == slot_of_.end() ? -1 : members_.at(it->second).wake.shim_fd();
}

WakeChannel::Drained GpuArbiter::drain_wake(uint64_t instance_id) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return WakeChannel::Drained::kNothing;
  return members_.at(it->second).wake.drain();
}

std::optional<uint64_t> GpuArbiter::holder() const {
  if (published_ == shm::kNoHolder) return std::nullopt;
  auto it = members_.find(published_);
  if (it == members_.end()) return std::nullopt;
  return it->second.instance.id;
}

void GpuArbiter::publish(std::optional<faa::InstanceId> holder, int64_t until) {
  const uint32_t slot = holder ? *holder : shm::kNoHolder;
  writer().set_slice_end(until);
  if (slot == published_ && writer().holder() == slot) return;
  EGPU_LOG_DEBUG("GPU %u: holder %d -> %d until %+.2f ms", gpu_, static_cast<int>(published_),
                 static_cast<int>(slot), until > 0 ? (until - monotonic_ns()) / 1e6 : 0.0);
  published_ = slot;
  writer().grant(slot);
  // Only the new holder's waiters need to run (see core/shm/grant_futex.h).
  if (auto m = members_.find(slot); m != members_.end()) wake(m->second);
}

int64_t GpuArbiter::tick(int64_t now) {
  observed_.clear();
  for (auto& [slot, m] : members_)
    observed_.emplace(slot, m.runtime.scan());
  const faa::Decision d = policy_.tick(now, observed_);
  publish_bound();
  if (d.draining) {
    publish_draining();
    return d.next_tick_ns;
  }
  publish(d.holder, d.slice_end_ns);
  writer().set_waiters(d.waiters);
  return d.next_tick_ns;
}

void GpuArbiter::publish_draining() {
  // Nobody may launch while the old holder's tail drains; the slot stays
  // published_ so the drain can be recognised at the next tick.
  if (writer().holder() == shm::kNoHolder) return;
  EGPU_LOG_DEBUG("GPU %u: holder %d draining", gpu_, static_cast<int>(published_));
  // No wake: waiters wait to be granted, and nobody is granted yet.
  writer().grant(shm::kNoHolder);
}

void GpuArbiter::heartbeat(int64_t now) {
  writer().beat(now);
  // The totals reach the ledger here, off the scheduling path (ticks come
  // every slice), and once more when an instance finishes.
  for (auto& [slot, m] : members_)
    fold_usage(slot, m, now);
}

void GpuArbiter::wake(Member& m) {
  if (shm::wake_granted(&m.runtime.page()->grant_word) < shm::kMaxWokenPerGrant ||
      m.said_wake_bound)
    return;
  m.said_wake_bound = true;
  EGPU_LOG_WARN(
      "instance %llu (uid %u) parks %d or more threads on its grant: each grant wakes %d, any "
      "others wake at their timeout",
      static_cast<unsigned long long>(m.instance.id), static_cast<unsigned>(m.instance.uid),
      shm::kMaxWokenPerGrant, shm::kMaxWokenPerGrant);
}

int GpuArbiter::trim_grown_pages(int64_t now, bool now_or_never) {
  // A job growing its page again and again is logged once a minute.
  constexpr int64_t kLogEveryNs = 60'000'000'000;
  int grown = 0;
  for (auto& [slot, m] : members_) {
    const InstanceRuntime::Growth g = m.runtime.take_back_growth(now, now_or_never);
    if (g.pending || g.taken_back > 0) ++grown;
    if (g.started) ++page_trims_;
    if (g.taken_back == 0) continue;
    if (m.page_growths++ == 0 || now - m.growth_logged_ns >= kLogEveryNs) {
      m.growth_logged_ns = now;
      EGPU_LOG_WARN(
          "instance %llu (uid %u): its user grew its page by %llu bytes (%llu times so far); "
          "taken back",
          static_cast<unsigned long long>(m.instance.id), static_cast<unsigned>(m.instance.uid),
          static_cast<unsigned long long>(g.taken_back),
          static_cast<unsigned long long>(m.page_growths));
    }
  }
  return grown;
}

void GpuArbiter::shutdown() {
  // A stopped agent must not leave the gate shut.
  writer().stop();
  for (auto& [slot, m] : members_)
    wake(m);
}

const accounting::UsageTotals* GpuArbiter::usage(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  return it == slot_of_.end() ? nullptr : &ledger_.totals(it->second);
}

const InstanceRuntime* GpuArbiter::runtime(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  return it == slot_of_.end() ? nullptr : &members_.at(it->second).runtime;
}

uint64_t GpuArbiter::waited_ns(uint64_t instance_id) const {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return 0;
  auto stats = policy_.scheduler().stats(it->second, monotonic_ns());
  return stats.ok() ? static_cast<uint64_t>(std::max<faa::Nanos>(stats.value().throttled, 0)) : 0;
}

std::optional<InstanceView> GpuArbiter::view(uint64_t instance_id, int64_t now) const {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return std::nullopt;
  const Member& m = members_.at(it->second);
  auto stats = policy_.scheduler().stats(it->second, now);
  if (!stats.ok()) return std::nullopt;
  InstanceView v;
  v.faa = stats.value();
  v.memory_used = m.runtime.memory_used();
  v.memory_limit = shm::slot_mem_limit(page()->slots[m.instance.slot]);
  v.throttled_ns = m.runtime.throttled_ns();
  v.device_ns = static_cast<uint64_t>(std::max<int64_t>(v.faa.charged, 0));
  v.reported_device_ns = m.runtime.device_ns_total();
  v.mem_denied = m.runtime.mem_denied();
  v.floor_charged_ns = static_cast<uint64_t>(policy_.floor_charged(it->second));
  v.processes = m.runtime.processes();
  v.target = policy_.target(it->second);
  return v;
}

}  // namespace egpu::agent
