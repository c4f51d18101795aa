// Opened RTLD_LOCAL (as CPython opens its extensions), this library looks a
// function of its own dependency up with dlsym(RTLD_DEFAULT): glibc searches
// the caller's scope, which holds that dependency; the global scope does not.
#include <dlfcn.h>

extern "C" int egpu_default_probe_lookup() {
  using Fn = int (*)();
  auto b = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "egpu_default_probe_b"));
  return b == nullptr ? -1 : b();
}
