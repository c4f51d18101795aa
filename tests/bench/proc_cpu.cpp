#include "proc_cpu.h"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace egpu::bench {
namespace {

double ticks_to_seconds(unsigned long long ticks) {
  static const long ticks_per_s = sysconf(_SC_CLK_TCK);
  return static_cast<double>(ticks) / static_cast<double>(ticks_per_s > 0 ? ticks_per_s : 100);
}

}  // namespace

std::optional<double> process_cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 2));
  std::vector<std::string> f;
  for (std::string item; fields >> item;)
    f.push_back(item);
  // f[0] is field 3 (state): utime is field 14, stime field 15.
  if (f.size() < 13) return std::nullopt;
  return ticks_to_seconds(std::stoull(f[11]) + std::stoull(f[12]));
}

std::optional<HostCpuTimes> host_cpu_times() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  if (!(in >> cpu) || cpu != "cpu") return std::nullopt;
  std::vector<unsigned long long> v;
  unsigned long long x = 0;
  // user nice system idle iowait irq softirq steal (guest time is inside user).
  for (int i = 0; i < 8 && in >> x; ++i)
    v.push_back(x);
  if (v.size() < 8) return std::nullopt;
  unsigned long long total = 0;
  for (unsigned long long t : v)
    total += t;
  const unsigned long long idle = v[3] + v[4];
  return HostCpuTimes{ticks_to_seconds(total - idle), ticks_to_seconds(total)};
}

}  // namespace egpu::bench
