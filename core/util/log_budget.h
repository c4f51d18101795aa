// LogBudget: how many lines a source may log, so that a user repeating a
// request that logs (a resize, an objective) cannot flood the journal and
// push the agent's real warnings past journald's rate limit. A TokenBucket:
// `burst` lines at once, refilled at `per_second`; a line over the
// budget is counted, and the next line allowed says how many were dropped.
// Pure: the caller passes the time.
#pragma once

#include <cstdint>
#include <string>

#include "core/util/token_bucket.h"

namespace egpu {

class LogBudget {
 public:
  LogBudget(double burst, double per_second) : bucket_(per_second / 1e9, burst, 0) {}

  struct Verdict {
    bool log = false;
    uint64_t dropped_before = 0;  // lines not logged since the last one that was
  };

  // `now_ns`: a monotonic time.
  Verdict take(int64_t now_ns) {
    if (!bucket_.holds(1.0, now_ns)) {
      ++dropped_;
      return {};
    }
    bucket_.spend(1.0, now_ns);
    Verdict v{true, dropped_};
    dropped_ = 0;
    return v;
  }

 private:
  TokenBucket bucket_;
  uint64_t dropped_ = 0;
};

// ", and 12 like it not logged" when lines were dropped before this one.
inline std::string dropped_note(const LogBudget::Verdict& v) {
  if (v.dropped_before == 0) return {};
  return ", and " + std::to_string(v.dropped_before) + " like it not logged";
}

}  // namespace egpu
