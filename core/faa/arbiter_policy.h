// ArbiterPolicy: every scheduling decision for one GPU, pure. The agent scans
// what each instance's shims published (Activity), hands it over with `now`,
// and publishes what comes back (Decision): the holder or a drain, the slice's
// end, the in-flight bound, the number of waiters and when to look again.
// The SliceScheduler decides FAA order; this class adds what the device forces
// on it: work already queued cannot be stopped (drain before handover, long
// kernels), charges arrive late and overlap (credit), reports may lie (the
// held-time floor), and a holder between a sync and its next launch is not
// idle (grace). No clock reads, syscalls or shared memory: tests drive it in
// simulated time.
#ifndef EGPU_CORE_FAA_ARBITER_POLICY_H
#define EGPU_CORE_FAA_ARBITER_POLICY_H

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "core/faa/gang_grants.h"
#include "core/faa/gang_window.h"
#include "core/faa/held_time_floor.h"
#include "core/faa/slice_scheduler.h"

namespace egpu::faa {

// What one scan of an instance's page showed. All of it is written by the
// job's own processes: the policy bounds what each field can buy.
struct Activity {
  Nanos device_ns = 0;     // device time newly reported by the shims
  bool launched = false;   // launches advanced since the last scan
  uint32_t busy = 0;       // threads blocked at the gate / in-flight bound / sync
  uint32_t processes = 0;  // attached processes
  Nanos inflight_ns = 0;   // device time its shims last said they had queued
  // The part of it from processes blocked in the gate, the bound or a sync:
  // those keep their figure current (the others said it at their last call).
  Nanos reported_inflight_ns = 0;
  Nanos idle_since_ns = 0;  // latest time a process said it went idle
};

struct PolicySettings {
  Config faa;
  Nanos inflight_limit_ns = 2 * kMillisecond;
  Nanos inflight_alone_ns = 0;  // while one burst instance alone has processes; 0 = the same
  Nanos idle_grace_ns = 500 * kMicrosecond;  // holder: no launch, nobody blocked = idle
  Nanos poll_ns = 500 * kMicrosecond;        // how often a contended holder is checked
  // Longest wait for an old holder's tail (one that keeps reporting it).
  Nanos max_drain_ns = 60 * kMillisecond;
  Nanos drain_poll_ns = 100 * kMicrosecond;  // how often a draining tail is checked
  // Handover: the next holder starts when the old one has at most this much
  // queued, so the two (almost) never share the device and each one's events
  // time only its own work; whatever overlap is left, trim_overcharge trims.
  Nanos handover_tail_ns = 200 * kMicrosecond;
  // Beyond the tail's estimate, before giving up on a holder that has stopped
  // reporting it (one that is not blocked in the gate, the bound or a sync).
  Nanos drain_slack_ns = kMillisecond;
  HeldTimeFloorParams floor;
};

struct Decision {
  // The instance whose shims may launch; nullopt while nobody may (no holder,
  // or `draining`: the old holder's queued tail is finishing first).
  std::optional<InstanceId> holder;
  bool draining = false;
  Nanos slice_end_ns = 0;  // the holder's slice ends here (0 without one)
  Nanos next_tick_ns = 0;  // when the policy wants to look again
  uint32_t waiters = 0;    // asking besides the holder, as of the last grant
};

class ArbiterPolicy {
 public:
  static Result<ArbiterPolicy> create(const PolicySettings& settings, Nanos now);

  // `holder`: the one a previous agent published, kept until the first tick.
  Status join(InstanceId id, double target, Mode mode, Nanos now);
  void leave(InstanceId id, Nanos now);
  // New targets and modes, all or nothing as far as FAA allows: shrinks are
  // applied before grows, so the sum never passes the GPU on the way.
  Status retarget(const std::map<InstanceId, std::pair<double, Mode>>& targets, Nanos now);
  // Between ticks: processes attached or left, so the in-flight bound fits.
  void set_processes(InstanceId id, uint32_t processes, Nanos now);
  // Makes the instance a gang member with this window on this GPU (nullopt:
  // sliced on its own again). Fails on an invalid window or an unknown id.
  Status set_gang_window(InstanceId id, std::optional<GangWindow> window);
  // Gangs on several GPUs hold or skip their windows together: the policies
  // of a node's GPUs share one GangGrants (each has its own until then),
  // each as its GPU `gpu`.
  void share_gang_grants(std::shared_ptr<GangGrants> grants, uint32_t gpu) {
    grants_ = std::move(grants);
    gpu_ = gpu;
  }
  // Restores who held the slice when a restarted agent reopens its GPU page.
  void restore_holder(std::optional<InstanceId> holder) { published_ = holder; }

  // One scan's worth: `observed` holds every member (absent ones count as
  // having shown nothing). Charges, updates who asks, decides.
  Decision tick(Nanos now, const std::map<InstanceId, Activity>& observed);

  // The bound on device time a process may have queued, for the GPU page.
  // Near a gang window's start or end it is the time left until then, so
  // the work queued before the boundary has run by it.
  Nanos inflight_bound() const { return std::min(inflight_bound_ns_, gang_bound_ns_); }
  // The instance allowed to launch as last decided (also while draining: the
  // one whose tail drains).
  std::optional<InstanceId> published() const { return published_; }
  const SliceScheduler& scheduler() const { return scheduler_; }
  double target(InstanceId id) const;
  Nanos floor_charged(InstanceId id) const;
  bool asking(InstanceId id) const;

 private:
  struct Member {
    double target = 0;
    Mode mode = Mode::kBurst;
    uint32_t processes = 0;
    Nanos last_activity = 0;
    bool asking = false;
    bool blocked = false;  // a thread blocked at the bound or in a sync (busy > 0)
    Nanos inflight_ns = 0;
    Nanos reported_inflight_ns = 0;
    bool ran_this_grant = false;  // launched since it last became the holder
    // A launch or a blocked thread was seen since the shim's idle hint was
    // last taken: the hint (when its last sync returned) is taken once per
    // activity, not whenever the page says so.
    bool idle_hint_armed = false;
    // Looks in a row that found it holding a contended slice and active: the
    // poll for an idle holder backs off as they add up (see granted()).
    uint32_t active_looks = 0;
    HeldTimeFloor floor;  // its reports cannot hold the slice for free
    // What it may still report while another holds the GPU: set when it
    // stops holding (its tail then, and what it had not reported yet), spent
    // by its reports, gone at tail_until_ns. Beyond it a report is not
    // charged, so it cannot cut the holder's charge in the trim.
    Nanos tail_budget_ns = 0;
    Nanos tail_until_ns = 0;
    bool wants = false;  // would ask, before gang windows are applied
    std::optional<GangWindow> gang;
  };

  ArbiterPolicy(const PolicySettings& settings, SliceScheduler scheduler);
  // `held_ns`: how long the holder held the slice since the last tick.
  void charge_and_observe(Nanos now, Nanos held_ns, const std::map<InstanceId, Activity>& observed);
  Decision decide(Nanos now);
  // Drains the holder's long tail or an old holder's tail before handover;
  // nullopt when no drain is due.
  std::optional<Decision> long_tail_drain(Nanos now);
  // Starts a handover drain towards `grant`'s holder, or nullopt when the old
  // holder's tail is short enough (or a preemption skips it).
  std::optional<Decision> start_handover(Nanos now, const Grant& grant, bool preempted);
  // While a handover drains: the drain decision, or nullopt when it is over.
  std::optional<Decision> handover_drain(Nanos now, Nanos slice_until);
  Decision granted(Nanos now, const Grant& grant);
  void update_inflight_bound(Nanos now);
  // Who may ask, given the gang members' windows (arbiter_policy_gang.cpp).
  void apply_gang_windows(Nanos now);
  // The next window boundary (or fence) of a gang member that wants the GPU.
  Nanos next_gang_boundary(Nanos now) const;
  // How far ahead of its share FAA finds the instance (achieved - target).
  double ahead(InstanceId id, Nanos now) const;
  bool in_gang_window(InstanceId id, Nanos now) const;
  // The member's window, unless it is not trusted with one now.
  static const GangWindow* window_of(const Member& m, Nanos now);

  PolicySettings settings_;
  SliceScheduler scheduler_;
  std::map<InstanceId, Member> members_;
  std::shared_ptr<GangGrants> grants_ = std::make_shared<GangGrants>();
  uint32_t gpu_ = 0;  // this GPU, to GangGrants
  std::optional<InstanceId> published_;
  Nanos slice_end_ns_ = 0;
  // Device time the GPU can have delivered and not yet been charged for.
  Nanos charge_credit_ns_ = 0;
  Nanos last_tick_ns_ = 0;
  Nanos planned_tick_ns_ = kNever;  // the next look the last decision asked for
  bool contended_ = false;          // someone besides the holder asked at the last grant
  uint32_t waiters_ = 0;
  // A handover waiting for the old holder's queued work to finish.
  std::optional<InstanceId> successor_;  // granted, not yet published
  Nanos drain_until_ns_ = 0;             // the tail estimate's deadline
  Nanos drain_started_ns_ = 0;           // when that drain began (MaxDrain counts from it)
  Nanos inflight_bound_ns_ = 0;
  Nanos gang_bound_ns_ = kNever;  // the time to the next boundary of a gang member that wants
  Nanos loose_bound_ns_ = 0;      // the deeper bound before it last tightened
  Nanos loose_until_ns_ = 0;      // until then, queues up to it are no long kernel
};

// The in-flight bound for a GPU where `with_processes` instances have
// processes attached and `all_burst` says whether they are all in burst mode.
// A lone burst instance gets the deeper alone bound: nobody can be waiting
// behind its queue. A capped one does not: its queue would run past its cap.
Nanos inflight_bound(const PolicySettings& settings, std::size_t with_processes, bool all_burst);

// Charges reported in one tick, trimmed so the GPU is never charged more
// time than passed: the largest charges are cut to one level, the one at
// which they add up to the credit. Shims measure their work with events;
// around a handover the old holder's queued tail and the new holder's first
// kernels share the device and both measure the overlap, which then comes
// off the larger charges first (at most the handover tail, 200 us, per
// handover: the larger share tends to pay it). A job that reports more than
// passed pays for it itself: taken equally from everyone, its lie would
// cancel its neighbours' charges, and their accounting with them.
// Before the trim, the agent believes an instance that does not hold the GPU
// only up to its tail budget (ArbiterPolicy::Member): levelled with the
// holder's, a job that never held it and reported a second a tick cut an
// honest holder's charge to half of what it ran, and with it the holder's
// usage, its cap and its held-time floor.
std::vector<Nanos> trim_overcharge(const std::vector<Nanos>& charges, Nanos* credit_ns);

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_ARBITER_POLICY_H
