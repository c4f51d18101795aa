#include "nodeagent/gpu_arbiter.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstring>
#include <new>

#include "core/util/clock.h"
#include "core/util/log.h"

namespace egpu::agent {
namespace {

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

faa::Mode to_faa(protocol::Mode m) {
  return m == protocol::Mode::kCap ? faa::Mode::kCap : faa::Mode::kBurst;
}

// Charges lag the work by up to the in-flight bound plus a marker interval;
// credit up to this much covers that lag.
constexpr int64_t kMaxChargeCreditNs = 50'000'000;
// A contended GPU is looked at every poll; a longer gap between two ticks is
// the agent's own stall (stopped, its host stalled), during which the jobs
// ran under their fail mode: at most this much of it counts as held.
constexpr int64_t kMaxHeldPerTickNs = 20'000'000;

}  // namespace

std::vector<int64_t> trim_overcharge(const std::vector<int64_t>& charges, int64_t* credit_ns) {
  std::vector<int64_t> out = charges;
  int64_t total = 0;
  for (int64_t c : charges)
    total += std::max<int64_t>(c, 0);
  int64_t excess = total - *credit_ns;
  // Water-filling: take the excess equally from everyone charged, never more
  // than an instance's own charge.
  while (excess > 0) {
    int64_t charged = 0;
    int64_t smallest = INT64_MAX;
    for (int64_t c : out) {
      if (c > 0) {
        ++charged;
        smallest = std::min(smallest, c);
      }
    }
    if (charged == 0) break;
    const int64_t each = std::min(smallest, (excess + charged - 1) / charged);
    for (int64_t& c : out) {
      if (c > 0 && excess > 0) {
        const int64_t take = std::min({each, c, excess});
        c -= take;
        excess -= take;
      }
    }
  }
  int64_t used = 0;
  for (int64_t c : out)
    used += std::max<int64_t>(c, 0);
  *credit_ns = std::max<int64_t>(0, *credit_ns - used);
  return out;
}

int64_t inflight_bound(const ArbiterSettings& settings, size_t with_processes, bool all_burst) {
  if (settings.inflight_alone_ns > 0 && with_processes <= 1 && all_burst) {
    return std::max(settings.inflight_alone_ns, settings.inflight_limit_ns);
  }
  return settings.inflight_limit_ns;
}

std::string GpuArbiter::page_path(const std::string& runtime_dir, uint32_t gpu) {
  return runtime_dir + "/gpu" + std::to_string(gpu);
}

GpuArbiter::GpuArbiter(uint32_t gpu, uint64_t memory, const ArbiterSettings& settings,
                       shm::PageFile page, faa::SliceScheduler scheduler)
    : gpu_(gpu),
      memory_bytes_(memory),
      settings_(settings),
      path_(page_path(settings.runtime_dir, gpu)),
      page_(std::move(page)),
      scheduler_(std::move(scheduler)) {}

GpuArbiter::~GpuArbiter() = default;

Result<std::unique_ptr<GpuArbiter>> GpuArbiter::open(uint32_t gpu, uint64_t memory_bytes,
                                                     const ArbiterSettings& settings,
                                                     std::vector<model::Instance>* recovered) {
  const std::string path = page_path(settings.runtime_dir, gpu);
  // Root only: shims get a read-only descriptor at attach, so a user sees the
  // page only while running an egpu job on this GPU.
  auto file = shm::open_page_file(path, sizeof(shm::GpuPage), 0, 0, 0600);
  if (!file) return Error{file.error()};
  auto* page = file->mapping.as<shm::GpuPage>();
  const bool reuse = !file->created && page->magic == shm::kGpuPageMagic &&
                     page->version == shm::kLayoutVersion && page->gpu_index == gpu &&
                     page->max_slots == settings.max_slots;
  if (reuse) {
    // Keep the file (shims map it) and the holder until the first decision.
    for (uint32_t s = 0; s < settings.max_slots; ++s) {
      const auto& c = page->slots[s];
      if (c.state.load() != static_cast<uint32_t>(shm::SlotState::kActive)) continue;
      model::Instance inst;
      inst.id = c.instance_id.load();
      inst.job_id = c.job_id.load();
      inst.step_id = c.step_id.load();
      inst.gpu = gpu;
      inst.slot = s;
      inst.uid = c.uid.load();
      inst.gid = c.gid.load();
      inst.units = c.units.load();
      inst.job_units = c.job_units.load();
      inst.mode = static_cast<protocol::Mode>(c.mode.load());
      inst.mem_quota = c.mem_quota.load();
      inst.umbrella = (c.flags.load() & protocol::kCreateUmbrella) != 0;
      inst.mem_quota_explicit = (c.flags.load() & shm::kSlotQuotaExplicit) != 0;
      inst.creator = {c.creator_pid.load(), c.creator_start.load()};
      if (recovered != nullptr) recovered->push_back(inst);
    }
  } else {
    new (page) shm::GpuPage();
    page->gpu_index = gpu;
    page->max_slots = settings.max_slots;
    page->holder.store(shm::kNoHolder);
  }
  page->gpu_memory_bytes = memory_bytes;
  page->heartbeat_timeout_ns.store(settings.heartbeat_timeout_ns);
  page->inflight_limit_ns.store(settings.inflight_limit_ns);
  page->fail_mode.store(static_cast<uint32_t>(settings.fail_mode));
  page->heartbeat_ns.store(monotonic_ns());
  page->agent_epoch.store(settings.epoch, std::memory_order_release);
  if (!reuse) {
    page->version = shm::kLayoutVersion;
    std::atomic_thread_fence(std::memory_order_release);
    page->magic = shm::kGpuPageMagic;
  }
  auto scheduler = faa::SliceScheduler::create(settings.faa, monotonic_ns());
  if (!scheduler.ok()) return Error{scheduler.error()};
  std::unique_ptr<GpuArbiter> arbiter(
      new GpuArbiter(gpu, memory_bytes, settings, std::move(*file), scheduler.value()));
  arbiter->published_ = page->holder.load();
  arbiter->inflight_bound_ns_ = settings.inflight_limit_ns;
  arbiter->last_tick_ns_ = monotonic_ns();
  arbiter->readonly_fd_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!arbiter->readonly_fd_.valid()) return Error{"open " + path + ": " + std::strerror(errno)};
  return arbiter;
}

void GpuArbiter::update_inflight_bound(const std::vector<InstanceActivity>* scanned) {
  size_t with_processes = 0;
  bool all_burst = true;
  size_t k = 0;
  for (const auto& [slot, m] : members_) {
    // A tick has just scanned every page; elsewhere count the slots.
    const uint32_t processes =
        scanned != nullptr ? (*scanned)[k++].processes : m.runtime.processes();
    if (processes == 0) continue;
    ++with_processes;
    all_burst = all_burst && m.instance.mode != protocol::Mode::kCap;
  }
  const int64_t bound = inflight_bound(settings_, with_processes, all_burst);
  if (bound == inflight_bound_ns_) return;
  EGPU_LOG_DEBUG("GPU %u: in-flight bound %.1f ms (%zu instance(s) with processes)", gpu_,
                 bound / 1e6, with_processes);
  if (bound < inflight_bound_ns_) {
    // What was queued under the deeper bound drains within that bound's
    // time; until then it is not a long kernel to wait for (see tick()).
    loose_bound_ns_ = inflight_bound_ns_;
    loose_until_ns_ = monotonic_ns() + inflight_bound_ns_;
  }
  inflight_bound_ns_ = bound;
  // Shims read it on their next slow-path launch (at least every 10 ms).
  page()->inflight_limit_ns.store(bound, std::memory_order_relaxed);
}

void GpuArbiter::write_control(const model::Instance& inst) {
  auto& c = page()->slots[inst.slot];
  c.mem_quota.store(inst.mem_quota, std::memory_order_relaxed);
  c.job_id.store(inst.job_id, std::memory_order_relaxed);
  c.step_id.store(inst.step_id, std::memory_order_relaxed);
  c.units.store(inst.units, std::memory_order_relaxed);
  c.job_units.store(inst.job_units, std::memory_order_relaxed);
  c.mode.store(static_cast<uint32_t>(inst.mode), std::memory_order_relaxed);
  c.uid.store(inst.uid, std::memory_order_relaxed);
  c.gid.store(inst.gid, std::memory_order_relaxed);
  c.flags.store((inst.umbrella ? protocol::kCreateUmbrella : 0) |
                    (inst.mem_quota_explicit ? shm::kSlotQuotaExplicit : 0),
                std::memory_order_relaxed);
  c.creator_pid.store(inst.creator.pid, std::memory_order_relaxed);
  c.creator_start.store(inst.creator.start, std::memory_order_relaxed);
  c.instance_id.store(inst.id, std::memory_order_release);
  c.state.store(static_cast<uint32_t>(shm::SlotState::kActive), std::memory_order_release);
}

Status GpuArbiter::add(const model::Instance& instance, double target, bool reopen) {
  if (instance.slot >= settings_.max_slots || members_.contains(instance.slot)) {
    return Error{"slot " + std::to_string(instance.slot) + " of GPU " + std::to_string(gpu_) +
                 " is not free"};
  }
  auto runtime = InstanceRuntime::open(settings_.runtime_dir, instance, reopen);
  if (!runtime) return Error{runtime.error()};
  auto wake = WakeChannel::create();
  if (!wake) return Error{wake.error()};
  const int64_t now = monotonic_ns();
  if (Status s = scheduler_.join(instance.slot, target, to_faa(instance.mode), now); !s.ok()) {
    ::unlink(runtime->path().c_str());
    return Error{s.error()};
  }
  write_control(instance);
  members_.emplace(instance.slot, Member{instance, std::move(*runtime), std::move(*wake), target,
                                         now, false, 0, 0, faa::HeldTimeFloor{}});
  slot_of_[instance.id] = instance.slot;
  update_inflight_bound();
  return {};
}

void GpuArbiter::remove(uint64_t instance_id) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return;
  const uint32_t slot = it->second;
  (void)scheduler_.leave(slot, monotonic_ns());
  auto& c = page()->slots[slot];
  c.state.store(static_cast<uint32_t>(shm::SlotState::kFree), std::memory_order_release);
  c.instance_id.store(0, std::memory_order_release);
  if (published_ == slot) publish(std::nullopt, 0);
  auto m = members_.find(slot);
  if (m != members_.end()) {
    ::unlink(m->second.runtime.path().c_str());
    members_.erase(m);
  }
  slot_of_.erase(it);
  update_inflight_bound();
}

void GpuArbiter::update_control(const model::Instance& instance) {
  auto it = slot_of_.find(instance.id);
  if (it == slot_of_.end()) return;
  members_.at(it->second).instance = instance;
  write_control(instance);
  update_inflight_bound();  // the mode may have changed
}

Status GpuArbiter::retarget(const std::map<uint64_t, std::pair<double, protocol::Mode>>& targets) {
  const int64_t now = monotonic_ns();
  // Two passes: shrinking first keeps the sum of targets within the GPU.
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [id, tm] : targets) {
      auto it = slot_of_.find(id);
      if (it == slot_of_.end()) continue;
      Member& m = members_.at(it->second);
      const bool shrink = tm.first <= m.target;
      if ((pass == 0) != shrink) continue;
      if (Status s = scheduler_.resize(it->second, tm.first, to_faa(tm.second), now); !s.ok()) {
        return Error{s.error()};
      }
      m.target = tm.first;
    }
  }
  return {};
}

int GpuArbiter::attach(uint64_t instance_id, pid_t pid) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return -1;
  const int proc_slot = members_.at(it->second).runtime.attach(pid);
  // A second job with processes: the holder's queue shrinks before this
  // process's first launch (a CUDA start-up takes far longer than 10 ms).
  update_inflight_bound();
  return proc_slot;
}

void GpuArbiter::reclaim(uint64_t instance_id, uint32_t proc_slot, pid_t pid) {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return;
  members_.at(it->second).runtime.reclaim(proc_slot, pid);
  update_inflight_bound();
}

pid_t GpuArbiter::process_in_slot(uint64_t instance_id, uint32_t proc_slot) const {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end() || proc_slot >= shm::kMaxProcsPerInstance) return 0;
  return members_.at(it->second)
      .runtime.page()
      ->procs[proc_slot]
      .pid.load(std::memory_order_acquire);
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
  page()->slice_end_ns.store(until, std::memory_order_relaxed);
  if (slot == published_ && page()->holder.load(std::memory_order_relaxed) == slot) return;
  EGPU_LOG_DEBUG("GPU %u: holder %d -> %d until %+.2f ms", gpu_, static_cast<int>(published_),
                 static_cast<int>(slot), until > 0 ? (until - monotonic_ns()) / 1e6 : 0.0);
  published_ = slot;
  page()->holder.store(slot, std::memory_order_release);
  page()->grant_seq.fetch_add(1, std::memory_order_release);
  futex_wake_all(&page()->grant_seq);
}

int64_t GpuArbiter::tick(int64_t now) {
  const int64_t since = last_tick_ns_ != 0 && now > last_tick_ns_ ? now - last_tick_ns_ : 0;
  // Credit is bounded: idle time is not banked for later overcharges.
  charge_credit_ns_ = std::min(charge_credit_ns_ + since, kMaxChargeCreditNs);
  last_tick_ns_ = now;
  std::vector<InstanceActivity> activity;
  std::vector<int64_t> charges;
  activity.reserve(members_.size());
  charges.reserve(members_.size());
  for (auto& [slot, m] : members_) {
    activity.push_back(m.runtime.scan());
    charges.push_back(activity.back().device_ns);
  }
  charges = trim_overcharge(charges, &charge_credit_ns_);
  update_inflight_bound(&activity);  // processes may also have left on their own
  size_t i = 0;
  for (auto& [slot, m] : members_) {
    const InstanceActivity& a = activity[i];
    // The time it held the slice while others waited is charged if its
    // reports fall short of it, where the agent can justify it: a blocked
    // thread (busy) means work queued on the GPU, a drain is its own tail,
    // and launches that bring (almost) no device time are a claim. A holder
    // that launches and reports as it goes, but whose host denies it the CPU
    // now and then, is not charged for the GPU's idle gaps.
    const int64_t held_ns = std::min(since, kMaxHeldPerTickNs);
    const bool claims =
        a.busy > 0 || drain_until_ns_ != 0 || (a.launched && charges[i] < held_ns / 4);
    const bool held = slot == published_ && contended_ && claims;
    const int64_t charge = m.floor.settle(charges[i++], held ? held_ns : 0);
    if (charge > 0) (void)scheduler_.charge(slot, charge, now);
    if (a.inflight_ns != m.inflight_ns) (void)scheduler_.set_pending(slot, a.inflight_ns, now);
    m.inflight_ns = a.inflight_ns;
    m.reported_inflight_ns = a.reported_inflight_ns;
    if (a.launched || a.busy > 0) {
      m.last_activity = now;
    } else if (a.idle_since_ns > m.last_activity && a.idle_since_ns <= now) {
      // The shim said when its last sync returned: the grace counts from then.
      m.last_activity = a.idle_since_ns;
    }
    // A waiting instance asks exactly while a thread is blocked (gate, bound
    // or sync). The holder keeps asking for a short grace after its last
    // launch: a process between a sync and its next launch is not idle.
    const bool holding = published_ == slot;
    const bool asking =
        a.processes > 0 &&
        (a.busy > 0 || (holding && now - m.last_activity < settings_.idle_grace_ns));
    if (asking != m.asking) {
      EGPU_LOG_DEBUG("GPU %u: slot %u %s (busy %u, launched %d, holding %d, idle %+.3f ms)", gpu_,
                     slot, asking ? "asks" : "idle", a.busy, a.launched ? 1 : 0, holding ? 1 : 0,
                     a.idle_since_ns != 0 ? (a.idle_since_ns - now) / 1e6 : 0.0);
      (void)scheduler_.set_asking(slot, asking, now);
      m.asking = asking;
    }
  }
  // A holder running a long kernel (more queued than twice the in-flight
  // bound) keeps the GPU until it is done: the gate cannot stop that work, so
  // the next decision waits until its charge has come in (its sync returns),
  // instead of starting another instance's slice on a busy device.
  // Its slice still ends on time: it may launch nothing more meanwhile.
  const int64_t long_tail =
      2 *
      (now < loose_until_ns_ ? std::max(loose_bound_ns_, inflight_bound_ns_) : inflight_bound_ns_);
  if (const auto h = members_.find(published_);
      h != members_.end() && h->second.asking && h->second.inflight_ns > long_tail &&
      now >= page()->slice_end_ns.load(std::memory_order_relaxed)) {
    if (drain_until_ns_ == 0) {
      drain_started_ns_ = now;
      drain_until_ns_ = now + std::min(h->second.inflight_ns, settings_.max_drain_ns);
    }
    if (now < drain_until_ns_) {
      publish_draining();
      return now + settings_.drain_poll_ns;
    }
  }
  const uint64_t preemptions_before = scheduler_.preemptions();
  const faa::Grant grant = scheduler_.decide(now);
  // A preemption is for latency: the newcomer starts at once and shares the
  // device with the old holder's tail (that overlap is trimmed from charges).
  const bool preempted = scheduler_.preemptions() != preemptions_before;
  // Drain before handover: work already queued cannot be stopped by the gate.
  // If the old holder still has more queued than the in-flight bound (a long
  // kernel), the new holder starts when it is done, so the two never share
  // the device, and each is charged exactly its own time. The GPU stays busy
  // meanwhile with the old holder's work, which FAA charges as overrun.
  const std::optional<faa::InstanceId> successor = grant.holder;
  const auto old = members_.find(published_);
  if (successor && published_ != shm::kNoHolder && *successor != published_ &&
      old != members_.end()) {
    // Waiting shims publish their remaining tail every kDrainPollNs; the next
    // holder starts when the old one's is within handover_tail_ns (its own
    // wake-up and first launch cover the rest), or at the deadline.
    const int64_t tail = old->second.inflight_ns;
    if (drain_until_ns_ == 0 && tail > settings_.handover_tail_ns && !preempted) {
      drain_started_ns_ = now;
      drain_until_ns_ = now + std::min(tail, settings_.max_drain_ns) + settings_.drain_slack_ns;
    }
    // The tail is an estimate (launches x their average duration) and one
    // long kernel among short ones outlasts it. A process blocked in the
    // gate or a sync keeps reporting its tail as it drains (the gate polls,
    // the sync returns when the work is done): that report is followed up to
    // MaxDrain. The rest of the tail, from processes that said it at their
    // last call, is waited for until the estimate's deadline only.
    const bool estimate_due = now < drain_until_ns_ && tail > settings_.handover_tail_ns;
    const bool report_due = now < drain_started_ns_ + settings_.max_drain_ns &&
                            old->second.reported_inflight_ns > settings_.handover_tail_ns;
    if (drain_until_ns_ != 0 && (estimate_due || report_due)) {
      publish_draining();
      return std::min(grant.until, now + settings_.drain_poll_ns);
    }
  }
  drain_until_ns_ = 0;
  publish(successor, grant.until);
  uint32_t waiters = 0;
  for (const auto& [slot, m] : members_) {
    if (m.asking && (!grant.holder || *grant.holder != slot)) ++waiters;
  }
  const bool others_asking = waiters > 0;
  contended_ = others_asking;
  if (page()->waiters.load(std::memory_order_relaxed) != waiters) {
    page()->waiters.store(waiters, std::memory_order_relaxed);
  }
  int64_t next = grant.until;
  // A contended holder is checked often so an idle one yields early; any
  // asking instance keeps the scan going so charges and asks are seen.
  if (others_asking || (grant.holder && members_.at(*grant.holder).asking)) {
    next = std::min(next, now + settings_.poll_ns);
    // A holder with nobody blocked may be going idle: look again exactly when
    // its grace runs out, so the slice moves on without a poll's delay.
    if (grant.holder && others_asking) {
      const Member& h = members_.at(*grant.holder);
      if (h.asking && h.last_activity + settings_.idle_grace_ns > now) {
        next = std::min(next, h.last_activity + settings_.idle_grace_ns + 1);
      }
    }
  }
  return next;
}

void GpuArbiter::publish_draining() {
  // Nobody may launch while the old holder's tail drains; the slot stays
  // published_ so the drain can be recognised at the next tick.
  if (page()->holder.load(std::memory_order_relaxed) == shm::kNoHolder) return;
  EGPU_LOG_DEBUG("GPU %u: holder %d draining", gpu_, static_cast<int>(published_));
  page()->holder.store(shm::kNoHolder, std::memory_order_release);
  page()->grant_seq.fetch_add(1, std::memory_order_release);
  futex_wake_all(&page()->grant_seq);
}

void GpuArbiter::heartbeat(int64_t now) {
  page()->heartbeat_ns.store(now, std::memory_order_release);
}

void GpuArbiter::shutdown() {
  // A stopped agent must not leave the gate shut: a zero heartbeat is stale at
  // once, so shims apply their fail mode without waiting for the timeout.
  page()->heartbeat_ns.store(0, std::memory_order_release);
  page()->grant_seq.fetch_add(1, std::memory_order_release);
  futex_wake_all(&page()->grant_seq);
}

std::optional<InstanceView> GpuArbiter::view(uint64_t instance_id, int64_t now) const {
  auto it = slot_of_.find(instance_id);
  if (it == slot_of_.end()) return std::nullopt;
  const Member& m = members_.at(it->second);
  auto stats = scheduler_.stats(it->second, now);
  if (!stats.ok()) return std::nullopt;
  InstanceView v;
  v.faa = stats.value();
  v.memory_used = m.runtime.memory_used();
  v.throttled_ns = m.runtime.throttled_ns();
  v.device_ns = m.runtime.device_ns_total();
  v.mem_denied = m.runtime.mem_denied();
  v.floor_charged_ns = static_cast<uint64_t>(m.floor.floor_charged());
  v.processes = m.runtime.processes();
  v.target = m.target;
  return v;
}

}  // namespace egpu::agent
