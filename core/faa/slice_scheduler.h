// FAA, the fine-grained anti-starvation slice scheduler of one physical GPU.
//
// Instances join and leave; each has a target share, a mode and an "asking"
// flag. decide() says which instance holds the GPU's slice (the right to submit
// work) and until when. The agent reports measured device time with charge(),
// and calls decide() after any change and at Grant::until at the latest.
//
// Pure: time is an argument (monotonic ns; a smaller `now` than seen before is
// treated as the latest time seen), no threads, clocks or I/O, and no
// allocation after join(). Not thread-safe: one owner per GPU.
#ifndef EGPU_CORE_FAA_SLICE_SCHEDULER_H
#define EGPU_CORE_FAA_SLICE_SCHEDULER_H

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/faa/config.h"
#include "core/faa/deadline_check.h"
#include "core/faa/decay_clock.h"
#include "core/faa/instance_state.h"
#include "core/faa/stats.h"
#include "core/faa/types.h"
#include "core/util/result.h"

namespace egpu::faa {

struct Grant {
  std::optional<InstanceId> holder;
  // The next time decide() must be called even if nothing else happens (end of
  // the slice, a pending preemption, a cap bucket refilling); kNever if none.
  Nanos until = kNever;
  // Counts grants on this GPU: changes whenever a new grant starts, also when
  // the same holder is granted again.
  std::uint64_t sequence = 0;
};

class SliceScheduler {
 public:
  // Fails with config.validate()'s message.
  static Result<SliceScheduler> create(const Config& config, Nanos now);

  // target in (0, 1] (units / 100); the sum over instances stays <= 1.
  // Starts at deviation 0: neither owed nor owing.
  Status join(InstanceId id, double target, Mode mode, Nanos now);
  // Frees the share at once; if it held the slice the next decide() re-decides.
  Status leave(InstanceId id, Nanos now);
  // New target and mode, used from the next decision on; the deviation is
  // kept (the grown or shrunk share counts from now on).
  Status resize(InstanceId id, double target, Mode mode, Nanos now);
  // Whether it has work: submitting, blocked in a launch, the in-flight bound or
  // a synchronize. A holder that stops asking ends its grant at once.
  Status set_asking(InstanceId id, bool asking, Nanos now);
  // Measured device time used by the instance (overrun included).
  Status charge(InstanceId id, Nanos device_time, Nanos now);
  // Device time it has queued that is not charged yet (it will run whoever
  // holds the slice): counted in its ordering key, so a holder is not chosen
  // again for work it already submitted. Replaces the previous value.
  Status set_pending(InstanceId id, Nanos pending, Nanos now);

  // Idempotent: without a change in between, calling it again returns the same
  // grant. Re-decides at slice end, on yield, on leave and for a preemption.
  Grant decide(Nanos now);
  // The grant decide() last started could not begin at once: the previous
  // holder's queued work (which the gate cannot stop) ran until `now`. That
  // time was the previous holder's, so the grant starts now with its whole
  // length, and `previous` waits from now. Call instead of decide() until
  // then: decide() would count the drain against both.
  Grant handover_done(InstanceId previous, Nanos now);

  Result<InstanceStats> stats(InstanceId id, Nanos now) const;
  GpuStats gpu_stats(Nanos now) const;
  const Config& config() const { return config_; }
  std::size_t size() const { return instances_.size(); }
  bool contains(InstanceId id) const { return index_.contains(id); }
  // Grants that ended another before its slice was over (latency preemptions).
  std::uint64_t preemptions() const { return preemptions_; }

 private:
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

  SliceScheduler(const Config& config, Nanos now);

  // Index of the instance, or an error naming it.
  Result<std::size_t> find(InstanceId id, const char* action) const;
  Status check_target(double target, double others) const;
  void advance(Nanos now);
  // Follows who asks alone; when a stretch of asking alone ends, forgives
  // what the instance used in it beyond its target.
  void track_sole_asker(Nanos now);
  void set_order_weight(InstanceState& instance) const;
  void set_patience(InstanceState& instance) const;
  double deviation(const InstanceState& instance) const;
  // Deviation with achieved shares rescaled so they add up to the allocated
  // total: idle GPU time (a holder's CPU phase, nobody asking) lowers every
  // achieved share alike and must not decide who may preempt.
  double relative_deviation(const InstanceState& instance) const;
  bool eligible(const InstanceState& instance, Nanos now) const;

  void start_grant(std::size_t index, Nanos now);
  void end_grant(Nanos now);
  std::size_t next_holder(Nanos now);
  Nanos wait_deadline(const InstanceState& instance) const;
  std::size_t preemptor(Nanos now) const;
  // The instance's ordering key, true frame (comparable across times).
  double order_key(const InstanceState& instance) const;
  struct Waiter {
    std::size_t index;  // kNone if nobody waits
    double key;         // its order_key(); the largest double if nobody waits
  };
  // The asking, eligible non-holder with the lowest key (newcomers to the
  // current grant excluded).
  Waiter lowest_waiter(Nanos now) const;
  // When the current grant ends by overdue takeover to `waiter` (the lowest
  // waiter now): <= now if it does now, kNever if not within the slice.
  Nanos overdue_takeover_at(Nanos now, const Waiter& waiter) const;
  // When the grant just started must be re-decided at the latest.
  Nanos grant_until(Nanos now) const;
  Nanos next_cap_ready(Nanos now) const;
  Grant current_grant(Nanos until) const;

  Config config_;
  DecayClock clock_;
  double tau_;
  std::vector<InstanceState> instances_;
  std::unordered_map<InstanceId, std::size_t> index_;
  DeadlineCheck deadlines_;
  double allocated_ = 0.0;
  // Decayed device time charged to anyone (stored frame): the utilisation.
  double busy_ = 0.0;
  // Decayed usage join() and resizes credited to the instances present
  // (stored frame; the sum of their `credited`), which never ran on the
  // device: added to busy_ for relative deviations only.
  double joined_history_ = 0.0;

  std::size_t holder_ = kNone;
  Nanos grant_start_ = 0;
  Nanos grant_end_ = 0;
  double grant_key_ = 0.0;  // the holder's order_key() at grant start
  bool takeover_ = false;   // the grant was won on order (may be taken over)
  std::size_t previous_holder_ = kNone;
  // The only instance asking, since when, and its true usage then: what it
  // uses while nobody else asks is idle capacity, not taken from anyone.
  std::size_t sole_ = kNone;
  Nanos sole_since_ = 0;
  double sole_start_used_ = 0.0;
  std::uint64_t grants_ = 0;
  std::uint64_t preemptions_ = 0;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_SLICE_SCHEDULER_H
