// Deadline: the CLOCK_MONOTONIC instant by which a whole exchange must be
// done. Each wait of the exchange polls for what is left of it, so the waits
// are bounded together, not each on its own (an agent that answers just in
// time, again and again, cannot stretch a call without end).
#pragma once

#include <climits>
#include <cstdint>

#include "core/util/clock.h"

namespace egpu {

class Deadline {
 public:
  explicit Deadline(int64_t at_ns) : at_ns_(at_ns) {}
  // `timeout_ms` from now; a negative timeout is a deadline already passed.
  static Deadline after_ms(int64_t timeout_ms) {
    return Deadline(monotonic_ns() + timeout_ms * 1'000'000);
  }

  int64_t at_ns() const { return at_ns_; }
  bool passed() const { return monotonic_ns() >= at_ns_; }
  // What is left as a poll(2) timeout: rounded up to whole milliseconds, so a
  // wait never ends before the deadline; 0 once it has passed.
  int poll_timeout_ms() const {
    const int64_t left_ns = at_ns_ - monotonic_ns();
    if (left_ns <= 0) return 0;
    const int64_t ms = (left_ns + 999'999) / 1'000'000;
    return ms > INT_MAX ? INT_MAX : static_cast<int>(ms);
  }

 private:
  int64_t at_ns_;
};

}  // namespace egpu
