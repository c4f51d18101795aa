// A dependency of default_probe_a's, in its local scope only.
extern "C" int egpu_default_probe_b() {
  return 7;
}
