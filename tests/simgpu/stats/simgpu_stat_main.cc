// simgpu-stat [--shm NAME] [--json] [--unlink]: prints the simulated GPUs'
// state (device clock, busy time, memory, contexts) or removes the segment.
#include <cstdio>
#include <cstring>
#include <string>

#include "simgpu_stats.h"

namespace {

int usage() {
  std::fprintf(stderr, "usage: simgpu-stat [--shm NAME] [--json] [--unlink]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = egpu::simgpu::segment_name_from_environment();
  bool json = false;
  bool unlink = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--shm") == 0 && i + 1 < argc) {
      name = argv[++i];
    } else if (std::strcmp(argv[i], "--json") == 0) {
      json = true;
    } else if (std::strcmp(argv[i], "--unlink") == 0) {
      unlink = true;
    } else {
      return usage();
    }
  }
  if (unlink) {
    if (!egpu::simgpu::remove_segment(name)) {
      std::fprintf(stderr, "simgpu-stat: %s: no such segment\n", name.c_str());
      return 1;
    }
    return 0;
  }
  std::string error;
  auto reader = egpu::simgpu::StatsReader::open(name, &error);
  if (!reader) {
    std::fprintf(stderr, "simgpu-stat: %s\n", error.c_str());
    return 1;
  }
  const egpu::simgpu::StatsSample sample = reader->sample();
  const std::string text =
      json ? egpu::simgpu::format_json(sample) + "\n" : egpu::simgpu::format_text(sample);
  std::fputs(text.c_str(), stdout);
  return 0;
}
