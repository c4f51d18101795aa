// Two libraries defining the same function, the first forwarding to "the next"
// definition with dlsym(RTLD_NEXT): the lookup must be relative to this
// library, not to the shim that interposes dlsym.
#include <dlfcn.h>

extern "C" int egpu_next_probe_value() {
  using Fn = int (*)();
  auto next = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "egpu_next_probe_value"));
  if (next == nullptr) return -1;
  if (next == &egpu_next_probe_value) return -2;  // found itself: wrong scope
  return 100 + next();
}
