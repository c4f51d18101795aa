// Shim logging: one line per message on stderr, "egpu-shim[pid]: ...", written
// with a single write(2) so lines of several processes never interleave. Rate
// limited (a misbehaving loop cannot flood a job's output); EGPU_DEBUG=1 adds
// debug lines.
#pragma once

#include <atomic>

namespace egpu::shim {

void set_debug_logging(bool on);
bool debug_logging();

// A message, subject to the global rate limit.
void log_line(const char* format, ...) __attribute__((format(printf, 1, 2)));
// Only when EGPU_DEBUG=1.
void log_debug(const char* format, ...) __attribute__((format(printf, 1, 2)));

// The first caller with a given flag logs; later ones do not.
class OnceFlag {
 public:
  bool first() { return !done_.exchange(true, std::memory_order_relaxed); }

 private:
  std::atomic<bool> done_{false};
};

}  // namespace egpu::shim

// Logs once per call site.
#define EGPU_SHIM_LOG_ONCE(...)                                        \
  do {                                                                 \
    static ::egpu::shim::OnceFlag egpu_once_flag__;                    \
    if (egpu_once_flag__.first()) ::egpu::shim::log_line(__VA_ARGS__); \
  } while (0)
