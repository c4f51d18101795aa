// hostile-tenant LABEL SECONDS: a job's task that attacks the node agent with
// everything egpu gave it (issue 10), beside honest jobs, for the Slurm
// end-to-end test (tests/slurm/hostile.sh). It launches kernels through the
// shim (so it is attached), then:
//   - clears the file status flags (O_NONBLOCK...) of every descriptor it has,
//   - floods every datagram socket it has (the wake channel) and shuts it down,
//   - truncates every regular file it has open for writing or has mapped and
//     can open for writing (its instance page), waits for the agent to look,
//     and restores the size (so this process's own shim does not fault),
//   - opens 200 connections to the agent's socket and holds them,
// then launches kernels for SECONDS, counting errors instead of stopping.
// Prints a JSON object after the attack and one at the end. Run as the
// job's (unprivileged) user.
#include <cuda.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu_session.h"
#include "spin_kernel.h"

namespace {

struct Attack {
  int fds_cleared = 0;
  int datagrams = 0;
  int channels_shut = 0;
  int files_truncated = 0;
  int connections = 0;
};

std::vector<int> open_descriptors() {
  std::vector<int> fds;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  const int own = dirfd(d);
  while (dirent* e = readdir(d)) {
    const int fd = std::atoi(e->d_name);
    if (e->d_name[0] != '.' && fd != own && fd > 2) fds.push_back(fd);
  }
  closedir(d);
  return fds;
}

// Files this process has mapped that it can open for writing: the shim
// closes its page descriptors after mapping them, but /proc/self/maps names
// the files. The simulated driver's segment (/dev/shm) is a test fixture with
// no counterpart on a real node (device files cannot be truncated): left out.
std::vector<int> writable_mapped_files() {
  std::vector<int> fds;
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return fds;
  char line[4096];
  std::vector<std::string> seen;
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    const char* path = std::strchr(line, '/');
    if (path == nullptr) continue;
    std::string p(path);
    while (!p.empty() && (p.back() == '\n' || p.back() == ' '))
      p.pop_back();
    if (p.rfind("/dev/shm/", 0) == 0) continue;
    bool dup = false;
    for (const auto& s : seen)
      dup = dup || s == p;
    if (dup) continue;
    seen.push_back(p);
    const int fd = open(p.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) fds.push_back(fd);
  }
  std::fclose(maps);
  return fds;
}

void attack(Attack* a, const char* agent_socket) {
  std::vector<std::pair<int, off_t>> truncated;
  std::vector<int> fds = open_descriptors();
  for (const int fd : writable_mapped_files())
    fds.push_back(fd);
  for (const int fd : fds) {
    if (fcntl(fd, F_SETFL, 0) == 0) ++a->fds_cleared;
    struct stat st {};
    if (fstat(fd, &st) != 0) continue;
    int type = 0;
    socklen_t len = sizeof type;
    if (S_ISSOCK(st.st_mode) && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
        type == SOCK_DGRAM) {
      const uint64_t one = 1;
      for (int i = 0; i < 100'000; ++i) {
        if (send(fd, &one, sizeof one, MSG_DONTWAIT | MSG_NOSIGNAL) < 0) break;
        ++a->datagrams;
      }
      if (shutdown(fd, SHUT_RDWR) == 0) ++a->channels_shut;
    }
    const int mode = fcntl(fd, F_GETFL) & O_ACCMODE;
    if (S_ISREG(st.st_mode) && mode != O_RDONLY && ftruncate(fd, 0) == 0) {
      truncated.emplace_back(fd, st.st_size);
      ++a->files_truncated;
    }
  }
  // The agent looks at a contended GPU every few ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  for (const auto& [fd, size] : truncated)
    (void)!ftruncate(fd, size);
  if (agent_socket == nullptr) return;
  for (int i = 0; i < 200; ++i) {
    const int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, agent_socket, sizeof addr.sun_path - 1);
    if (s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
      ++a->connections;  // held until exit
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: hostile-tenant LABEL SECONDS\n");
    return 2;
  }
  setenv("SIMGPU_LABEL", argv[1], 0);
  const double seconds = std::atof(argv[2]);
  try {
    egpu::workload::GpuSession session(0);
    const egpu::workload::SpinKernel spin(session.spin_function(), session.stream(), 1.0);
    uint64_t launched = 0;
    uint64_t errors = 0;
    const auto launch = [&] {
      try {
        spin.launch(1'000'000);
        ++launched;
      } catch (const std::exception&) {
        ++errors;
      }
    };
    for (int i = 0; i < 200; ++i)
      launch();
    Attack a;
    attack(&a, std::getenv("EGPU_SOCKET"));
    // Said at once: its own launches may block from here on (its shim's page
    // is not the one the agent reads any more), and the job is cancelled.
    std::printf(
        "{\"label\": \"%s\", \"fds_cleared\": %d, \"datagrams\": %d, \"channels_shut\": %d, "
        "\"files_truncated\": %d, \"connections\": %d}\n",
        argv[1], a.fds_cleared, a.datagrams, a.channels_shut, a.files_truncated, a.connections);
    std::fflush(stdout);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end)
      launch();
    std::printf("{\"label\": \"%s\", \"launched\": %llu, \"errors\": %llu}\n", argv[1],
                static_cast<unsigned long long>(launched), static_cast<unsigned long long>(errors));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hostile-tenant: %s\n", e.what());
    return 1;
  }
}
