// Prints what egpu_next_probe_value() returns: 102 when RTLD_NEXT works.
#include <cstdio>

extern "C" int egpu_next_probe_value();

int main() {
  std::printf("%d\n", egpu_next_probe_value());
  return 0;
}
