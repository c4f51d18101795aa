#include "nodeagent/clock_quality.h"

#include <sys/timex.h>
#include <time.h>

namespace egpu::agent {

faa::ClockQuality read_clock_quality() {
  timex tx{};  // modes 0: read only
  const int state = ::adjtimex(&tx);
  faa::ClockQuality q;
  q.synchronized = state != -1 && state != TIME_ERROR && (tx.status & STA_UNSYNC) == 0;
  q.error_bound = static_cast<faa::Nanos>(tx.esterror) * 1000;  // microseconds
  return q;
}

faa::Nanos wall_aligned_epoch(faa::Nanos period) {
  timespec mono{};
  timespec real{};
  ::clock_gettime(CLOCK_MONOTONIC, &mono);
  ::clock_gettime(CLOCK_REALTIME, &real);
  const faa::Nanos mono_ns = mono.tv_sec * faa::kSecond + mono.tv_nsec;
  const faa::Nanos real_ns = real.tv_sec * faa::kSecond + real.tv_nsec;
  return mono_ns - real_ns % period;
}

}  // namespace egpu::agent
