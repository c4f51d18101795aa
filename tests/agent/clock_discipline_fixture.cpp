// A test fixture preloaded into the agent: adjtimex answers what the file
// named by EGPU_TEST_CLOCK says ("1 120": synchronized, estimated error
// 120 us; "0 0": not synchronized), so a test can take the clock discipline
// away from a running agent and give it back without root or chrony. Any
// request that would set the clock, or a missing or unreadable file, goes to
// the real adjtimex.
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/timex.h>
#include <time.h>

#include <cstdio>
#include <cstdlib>

namespace {

int real_adjtimex(timex* tx) {
  using Fn = int (*)(timex*);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "adjtimex"));
  return next != nullptr ? next(tx) : -1;
}

// The file's fields: synchronized, esterror, maxerror, realtime shift (us).
struct Reading {
  int synchronized = 0;
  long error_us = 0;
  long max_error_us = 0;
  long shift_us = 0;
  int fields = 0;
};

Reading read_file() {
  Reading r;
  const char* path = std::getenv("EGPU_TEST_CLOCK");
  if (path == nullptr) return r;
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return r;
  r.fields =
      std::fscanf(f, "%d %ld %ld %ld", &r.synchronized, &r.error_us, &r.max_error_us, &r.shift_us);
  std::fclose(f);
  return r;
}

// The file's reading, read again only when the file was replaced (tests
// rename a new one in): the agent brackets its wall clock read between two
// monotonic ones and takes a gap over 10 us for a preemption, and opening
// and parsing the file on every read took longer than that in sanitized
// builds. One cache per thread: the agent's log reads the clock elsewhere.
Reading reading() {
  thread_local Reading cached;
  thread_local ino_t cached_ino = 0;
  thread_local bool read_once = false;
  const char* path = std::getenv("EGPU_TEST_CLOCK");
  struct stat st {};
  if (path == nullptr || ::stat(path, &st) != 0) return Reading{};
  if (!read_once || st.st_ino != cached_ino) {
    cached = read_file();
    cached_ino = st.st_ino;
    read_once = true;
  }
  return cached;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int adjtimex(timex* tx) {
  if (tx->modes != 0) return real_adjtimex(tx);
  const Reading r = read_file();
  if (r.fields < 2) return real_adjtimex(tx);
  *tx = timex{};
  tx->status = r.synchronized != 0 ? 0 : STA_UNSYNC;
  tx->esterror = r.error_us;
  tx->maxerror = r.max_error_us;
  return r.synchronized != 0 ? TIME_OK : TIME_ERROR;
}

// CLOCK_REALTIME shifted by the file's fourth field: a stepped wall clock.
extern "C" __attribute__((visibility("default"))) int clock_gettime(clockid_t id, timespec* ts) {
  using Fn = int (*)(clockid_t, timespec*);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "clock_gettime"));
  if (next == nullptr) return -1;
  const int rc = next(id, ts);
  if (rc != 0 || id != CLOCK_REALTIME) return rc;
  const Reading r = reading();
  if (r.fields < 4 || r.shift_us == 0) return rc;
  long long ns = static_cast<long long>(ts->tv_nsec) + r.shift_us * 1000LL;
  ts->tv_sec += static_cast<time_t>(ns / 1'000'000'000LL);
  ns %= 1'000'000'000LL;
  if (ns < 0) {
    ns += 1'000'000'000LL;
    ts->tv_sec -= 1;
  }
  ts->tv_nsec = static_cast<long>(ns);
  return rc;
}
