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
  q.max_error = static_cast<faa::Nanos>(tx.maxerror) * 1000;
  return q;
}

faa::Nanos wall_aligned_epoch(faa::Nanos period, faa::Nanos* uncertainty) {
  // The wall clock read between two monotonic readings, the tightest of a
  // few tries: a preemption between the reads would otherwise shift the
  // epoch by as long as it lasted (and the clock watch would take it for a
  // stepped clock).
  auto ns = [](const timespec& t) { return t.tv_sec * faa::kSecond + t.tv_nsec; };
  faa::Nanos best_gap = -1;
  faa::Nanos mono_ns = 0;
  faa::Nanos real_ns = 0;
  for (int attempt = 0; attempt < 3; ++attempt) {
    timespec before{};
    timespec real{};
    timespec after{};
    ::clock_gettime(CLOCK_MONOTONIC, &before);
    ::clock_gettime(CLOCK_REALTIME, &real);
    ::clock_gettime(CLOCK_MONOTONIC, &after);
    const faa::Nanos gap = ns(after) - ns(before);
    if (best_gap < 0 || gap < best_gap) {
      best_gap = gap;
      mono_ns = ns(before) + gap / 2;
      real_ns = ns(real);
    }
  }
  if (uncertainty != nullptr) *uncertainty = best_gap;
  return mono_ns - real_ns % period;
}

}  // namespace egpu::agent
