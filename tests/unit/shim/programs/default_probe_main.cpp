// Prints what default_probe_a (argv[1], opened RTLD_LOCAL) finds of its own
// dependency through dlsym(RTLD_DEFAULT), and whether RTLD_DEFAULT finds
// cuInit in this process that never loads the driver: "7 absent" with and
// without the shim.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  void* a = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (a == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  using Lookup = int (*)();
  auto lookup = reinterpret_cast<Lookup>(dlsym(a, "egpu_default_probe_lookup"));
  if (lookup == nullptr) return 4;
  std::printf("%d %s\n", lookup(), dlsym(RTLD_DEFAULT, "cuInit") == nullptr ? "absent" : "found");
  return 0;
}
