// A test fixture preloaded into the agent: adjtimex answers what the file
// named by EGPU_TEST_CLOCK says ("1 120": synchronized, estimated error
// 120 us; "0 0": not synchronized), so a test can take the clock discipline
// away from a running agent and give it back without root or chrony. Any
// request that would set the clock, or a missing or unreadable file, goes to
// the real adjtimex.
#include <dlfcn.h>
#include <sys/timex.h>

#include <cstdio>
#include <cstdlib>

namespace {

int real_adjtimex(timex* tx) {
  using Fn = int (*)(timex*);
  static Fn next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "adjtimex"));
  return next != nullptr ? next(tx) : -1;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int adjtimex(timex* tx) {
  const char* path = std::getenv("EGPU_TEST_CLOCK");
  if (tx->modes != 0 || path == nullptr) return real_adjtimex(tx);
  FILE* f = std::fopen(path, "re");
  if (f == nullptr) return real_adjtimex(tx);
  int synchronized = 0;
  long error_us = 0;
  const int read = std::fscanf(f, "%d %ld", &synchronized, &error_us);
  std::fclose(f);
  if (read != 2) return real_adjtimex(tx);
  *tx = timex{};
  tx->status = synchronized != 0 ? 0 : STA_UNSYNC;
  tx->esterror = error_us;
  return synchronized != 0 ? TIME_OK : TIME_ERROR;
}
