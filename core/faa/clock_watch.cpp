#include "core/faa/clock_watch.h"

#include <algorithm>

namespace egpu::faa {

ClockWatch::ClockWatch(const Settings& settings) : settings_(settings) {}

namespace {
// The kernel's growth of maxerror without updates (MAXFREQ, 500 ppm), and
// the slack for reads on either side of its once-a-second step.
constexpr Nanos kMaxErrorGrowthDivisor = 2000;  // 1 s -> 500 us
constexpr Nanos kMaxErrorSlack = 1 * kMillisecond;
}  // namespace

Status ClockWatch::judge(const ClockQuality& reading, Nanos now) {
  if (Status s = can_align_across_nodes(reading, settings_.tolerance); !s.ok()) return s;
  if (reading.max_error <= 0) return {};
  if (!update_seen_) {
    // No update seen yet (a restarted agent): maxerror past what it grows
    // to in stale_after from a value within the tolerance says the last
    // one is older than that. Taken as fresh, it gave a dead discipline
    // stale_after more.
    const Nanos most = settings_.stale_after / kMaxErrorGrowthDivisor + settings_.tolerance;
    if (reading.max_error > most) {
      return Error{"the clock's maxerror is " + std::to_string(reading.max_error / kMillisecond) +
                   " ms: the clock discipline has not updated the clock for over " +
                   std::to_string(settings_.stale_after / kSecond) +
                   " s (maxerror grows unchecked): is chronyd, ntpd or ptp4l running?"};
    }
  }
  const Nanos projected = updated_max_error_ + (now - updated_at_) / kMaxErrorGrowthDivisor;
  if (!update_seen_ || reading.max_error + kMaxErrorSlack < projected) {
    update_seen_ = true;  // below the line from the last update: a new one came
    updated_at_ = now;
    updated_max_error_ = reading.max_error;
    return {};
  }
  const Nanos since = now - updated_at_;
  if (since <= settings_.stale_after) return {};
  return Error{"the clock discipline has not updated the clock for " +
               std::to_string(since / kSecond) +
               " s (maxerror grows unchecked): is chronyd, ntpd or ptp4l running?"};
}

ClockWatch::Change ClockWatch::observe(const ClockQuality& reading, Nanos now) {
  const Status ok = judge(reading, now);
  if (!observed_) {
    observed_ = true;
    aligned_ = ok.ok();
    reason_ = ok.ok() ? std::string() : ok.error();
    good_in_a_row_ = 0;
    return Change::kNone;
  }
  if (aligned_) {
    if (ok.ok()) return Change::kNone;
    aligned_ = false;
    good_in_a_row_ = 0;
    reason_ = ok.error();
    return Change::kLost;
  }
  const Nanos margin = settings_.tolerance / 4 * 3;
  if (!ok.ok()) {
    good_in_a_row_ = 0;
    reason_ = ok.error();
    return Change::kNone;
  }
  if (reading.error_bound > margin) {
    good_in_a_row_ = 0;
    reason_ = "the clock's estimated error " + std::to_string(reading.error_bound / 1000) +
              " us is back within the tolerance but not yet under " +
              std::to_string(margin / 1000) + " us";
    return Change::kNone;
  }
  ++good_in_a_row_;
  if (good_in_a_row_ >= std::max(settings_.readings_to_regain, 1)) {
    aligned_ = true;
    good_in_a_row_ = 0;
    reason_.clear();
    return Change::kRegained;
  }
  reason_ = "the clock is good again: " + std::to_string(good_in_a_row_) + " of " +
            std::to_string(settings_.readings_to_regain) + " readings before aligning";
  return Change::kNone;
}

bool epoch_moved(Nanos before, Nanos after, Nanos period, Nanos slack) {
  if (period <= 0) return false;
  Nanos d = (after - before) % period;
  if (d < 0) d += period;
  return std::min(d, period - d) > slack;
}

Nanos keep_or_move_epoch(Nanos previous, Nanos read, Nanos uncertainty, Nanos read_slack,
                         Nanos period, Nanos moved_slack) {
  if (previous == 0) return read;
  if (uncertainty > read_slack) return previous;
  return epoch_moved(previous, read, period, moved_slack) ? read : previous;
}

}  // namespace egpu::faa
