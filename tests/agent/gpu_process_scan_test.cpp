// The agent's reading of /proc for processes that use a GPU without the shim
// (nodeagent/gpu_process_scan.h): maps texts as the kernel writes them, and
// one scan of this very process.
#include "nodeagent/gpu_process_scan.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>

namespace egpu::agent {
namespace {

std::vector<DeviceFile> two_gpus() {
  return {DeviceFile{makedev(0, 5), 1234, "/dev/nvidia0"},
          DeviceFile{makedev(0, 5), 1235, "/dev/nvidia1"}};
}

TEST(GpuProcessScan, MapsNameTheGpusByDeviceAndInodeAndTheShimByItsFileName) {
  std::istringstream maps(
      "7f0000000000-7f0000001000 rw-s 00000000 00:05 1235                       /dev/nvidia1\n"
      "7f0000002000-7f0000003000 r--p 00000000 fd:01 777 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7f0000004000-7f0000005000 r-xp 00001000 fd:01 888 /opt/egpu/lib/libegpu-shim.so\n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n");
  const MapsFinding f = read_maps(maps, two_gpus(), "libegpu-shim.so");
  EXPECT_EQ(f.gpus, std::vector<uint32_t>{1});
  EXPECT_TRUE(f.maps_shim);
}

TEST(GpuProcessScan, AFileOfTheSameNameElsewhereOrAnotherInodeIsNotTheGpu) {
  std::istringstream maps(
      // Same inode on another filesystem, same filesystem another inode.
      "7f0000000000-7f0000001000 rw-s 00000000 00:06 1234 /tmp/nvidia0\n"
      "7f0000001000-7f0000002000 rw-s 00000000 00:05 9999 /dev/nvidia0\n"
      // Not the shim: a name that merely ends like it.
      "7f0000004000-7f0000005000 r-xp 00001000 fd:01 888 /tmp/not-libegpu-shim.so\n");
  const MapsFinding f = read_maps(maps, two_gpus(), "libegpu-shim.so");
  EXPECT_TRUE(f.gpus.empty());
  EXPECT_FALSE(f.maps_shim);
}

TEST(GpuProcessScan, AShimReplacedByAnUpgradeStillCountsAndPathsMayHoldSpaces) {
  std::istringstream maps(
      "7f0000004000-7f0000005000 r-xp 00001000 fd:01 888 /usr/lib/egpu/libegpu-shim.so "
      "(deleted)\n"
      "7f0000006000-7f0000007000 rw-s 00000000 00:2a 42 /dev/shm/a b.gpu3\n");
  // A device file that could not be looked up is matched by its path.
  const std::vector<DeviceFile> devices = {DeviceFile{0, 0, "/dev/shm/a b.gpu3"}};
  const MapsFinding f = read_maps(maps, devices, "libegpu-shim.so");
  EXPECT_EQ(f.gpus, std::vector<uint32_t>{0});
  EXPECT_TRUE(f.maps_shim);
}

TEST(GpuProcessScan, MalformedLinesAreSkipped) {
  std::istringstream maps("garbage\n\n7f-7f rw-s 0 zz:zz 12 /dev/nvidia0\n- - - 00:05 1234\n");
  const MapsFinding f = read_maps(maps, two_gpus(), "libegpu-shim.so");
  EXPECT_EQ(f.gpus, std::vector<uint32_t>{0});  // the last line: no path, the right file
  EXPECT_FALSE(f.maps_shim);
}

// A scan of a child process (of another user when the test is root's: scans
// never look at root's processes): a file it maps as a "GPU" is found, one it
// only has open is not, unless its maps could not be read before.
TEST(GpuProcessScan, AScanFindsWhatAProcessMaps) {
  const uid_t uid = geteuid() == 0 ? 4244 : geteuid();
  const std::string dir = ::testing::TempDir();
  const std::string mapped = dir + "/scan-gpu0", opened = dir + "/scan-gpu1";
  const int m = ::open(mapped.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  const int o = ::open(opened.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_GE(m, 0);
  ASSERT_GE(o, 0);
  ASSERT_EQ(::ftruncate(m, 4096), 0);
  int ready[2];
  ASSERT_EQ(::pipe2(ready, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Mapped and open as its own user's process, then waits to be killed.
    void* map = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, m, 0);
    if (map == MAP_FAILED || (geteuid() == 0 && (::setgid(uid) != 0 || ::setuid(uid) != 0)))
      ::_exit(1);
    if (::write(ready[1], "r", 1) != 1) ::_exit(1);
    for (;;)
      ::pause();
  }
  ::close(ready[1]);
  char byte = 0;
  ASSERT_EQ(::read(ready[0], &byte, 1), 1);
  ::close(ready[0]);
  GpuProcessScanRequest request;
  request.uids = {uid};
  request.devices = device_files({mapped, opened});
  request.shim_name = "libegpu-shim.so";
  std::atomic<pid_t> reading{0};
  int found = 0;
  for (const auto& s : scan_gpu_processes(request, &reading)) {
    if (s.pid != child) continue;
    ++found;
    EXPECT_EQ(s.gpus, std::vector<uint32_t>{0});
    EXPECT_FALSE(s.maps_shim);
    EXPECT_EQ(s.uid, uid);
    EXPECT_EQ(s.start_time, process_start_time(child));
    EXPECT_NE(s.start_time, 0u);
  }
  EXPECT_EQ(found, 1);
  EXPECT_EQ(reading.load(), 0);
  // Its maps unreadable (a scan stuck on it before): its open descriptors
  // name both files, and it is taken not to map the shim.
  request.maps_unreadable = {child};
  found = 0;
  for (const auto& s : scan_gpu_processes(request, &reading)) {
    if (s.pid != child) continue;
    ++found;
    EXPECT_EQ(s.gpus, (std::vector<uint32_t>{0, 1}));
  }
  EXPECT_EQ(found, 1);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(m);
  ::close(o);
  std::filesystem::remove(mapped);
  std::filesystem::remove(opened);
}

}  // namespace
}  // namespace egpu::agent
