// The agent's reading of /proc for processes that use a GPU without the shim
// (nodeagent/gpu_process_scan.h): maps texts as the kernel writes them, and
// scans of child processes that play a job's.
#include "nodeagent/gpu_process_scan.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>

#include "nodeagent/proc_files.h"

namespace egpu::agent {
namespace {

std::vector<DeviceFile> two_gpus() {
  return {DeviceFile{makedev(0, 5), 1234, "/dev/nvidia0"},
          DeviceFile{makedev(0, 5), 1235, "/dev/nvidia1"}};
}

const std::vector<DeviceFile> kShim = {DeviceFile{makedev(254, 1), 888, "/usr/lib/egpu/shim.so"}};

TEST(GpuProcessScan, MapsNameTheGpusAndTheShimByDeviceAndInode) {
  std::istringstream maps(
      "7f0000000000-7f0000001000 rw-s 00000000 00:05 1235                       /dev/nvidia1\n"
      "7f0000002000-7f0000003000 r--p 00000000 fd:01 777 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      // Same inode on another filesystem, same filesystem another inode.
      "7f0000003000-7f0000004000 rw-s 00000000 00:06 1234 /tmp/nvidia0\n"
      "7f0000004000-7f0000005000 rw-s 00000000 00:05 9999 /dev/nvidia0\n"
      "7f0000005000-7f0000006000 r-xp 00001000 fe:01 888 /usr/lib/egpu/shim.so\n"
      "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0                          [stack]\n");
  const MapsFinding f = read_maps(maps, two_gpus(), kShim);
  EXPECT_EQ(f.gpus, std::vector<uint32_t>{1});
  EXPECT_TRUE(f.maps_shim);
}

// A file of the shim's name elsewhere is not the shim; the shim an upgrade
// replaced (at its path, deleted) still is, and so is the shim's path on
// another device and inode (overlayfs names the underlying file in maps).
// A node of GPU 0's device made elsewhere (a container's /dev): its open
// descriptor showed it the same device, and its mapping counts as GPU 0's.
TEST(GpuProcessScan, AnotherNodeOfTheDeviceMapsTheGpu) {
  std::istringstream maps(
      "7f0000000000-7f0000001000 rw-s 00000000 00:2a 77 /containers/c1/dev/nvidia0\n");
  const std::vector<std::pair<uint32_t, DeviceFile>> aliases = {
      {0, DeviceFile{makedev(0, 0x2a), 77, {}, makedev(195, 0)}}};
  EXPECT_EQ(read_maps(maps, two_gpus(), kShim, false, aliases).gpus, std::vector<uint32_t>{0});
  std::istringstream same(
      "7f0000000000-7f0000001000 rw-s 00000000 00:2a 77 /containers/c1/dev/nvidia0\n");
  EXPECT_TRUE(read_maps(same, two_gpus(), kShim).gpus.empty());
}

TEST(GpuProcessScan, OnlyTheShimsOwnFileIsTheShim) {
  std::istringstream copy(
      "7f0000005000-7f0000006000 r-xp 00001000 00:2a 888 /tmp/shim.so\n"
      "7f0000006000-7f0000007000 r-xp 00001000 fe:01 887 /tmp/x/shim.so\n");
  EXPECT_FALSE(read_maps(copy, two_gpus(), kShim).maps_shim);
  std::istringstream replaced(
      "7f0000005000-7f0000006000 r-xp 00001000 fe:01 555 /usr/lib/egpu/shim.so (deleted)\n");
  EXPECT_TRUE(read_maps(replaced, two_gpus(), kShim).maps_shim);
  std::istringstream overlay(
      "7f0000005000-7f0000006000 r-xp 00001000 00:31 4711 /usr/lib/egpu/shim.so\n");
  EXPECT_TRUE(read_maps(overlay, two_gpus(), kShim).maps_shim);
  std::istringstream deleted_copy(
      "7f0000005000-7f0000006000 r-xp 00001000 00:2a 556 /tmp/shim.so (deleted)\n");
  EXPECT_FALSE(read_maps(deleted_copy, two_gpus(), kShim).maps_shim);
}

TEST(GpuProcessScan, AFileNotLookedUpIsMatchedByItsPathSpacesAndDeletionIncluded) {
  std::istringstream maps(
      "7f0000006000-7f0000007000 rw-s 00000000 00:2a 42 /dev/shm/a b.gpu3 (deleted)\n");
  const std::vector<DeviceFile> devices = {DeviceFile{0, 0, "/dev/shm/a b.gpu3"}};
  EXPECT_EQ(read_maps(maps, devices, kShim).gpus, std::vector<uint32_t>{0});
}

TEST(GpuProcessScan, MalformedLinesAreSkipped) {
  std::istringstream maps("garbage\n\n7f-7f rw-s 0 zz:zz 12 /dev/nvidia0\n- - - 00:05 1234\n");
  EXPECT_EQ(read_maps(maps, two_gpus(), kShim).gpus, std::vector<uint32_t>{0});  // the last line
}

// A job's process, played by a child (of another user when the test is
// root's: scans never look at root's processes). It holds two files open as
// GPUs 0 and 1 and maps GPU 0's.
class ScannedChild {
 public:
  // kDetachedMount: GPU 0's file opened through a bind mount the child then
  // detached in its own mount namespace, and nothing else of the GPUs open.
  // kSubordinateUid: run as the user's subordinate uid (kSubordinateOffset
  // past it), in a user namespace the user made, as newuidmap would map it.
  enum class Shape { kPlain, kWithShim, kOddName, kLeaderExited, kDetachedMount, kSubordinateUid };
  static constexpr uid_t kSubordinateOffset = 100000;

  explicit ScannedChild(Shape shape) {
    const std::string dir = ::testing::TempDir();
    paths_ = {dir + "/scan-gpu0-" + std::to_string(getpid()),
              dir + "/scan-gpu1-" + std::to_string(getpid()),
              dir + "/scan-shim-" + std::to_string(getpid())};
    const int m = ::open(paths_[0].c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int o = ::open(paths_[1].c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const int shim = ::open(paths_[2].c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (m < 0 || o < 0 || shim < 0 || ::ftruncate(m, 4096) != 0 || ::ftruncate(shim, 4096) != 0)
      return;
    // The shim as a preloaded library is mapped: here, when asked, its file.
    if (shape == Shape::kWithShim &&
        ::mmap(nullptr, 4096, PROT_READ, MAP_PRIVATE, shim, 0) == MAP_FAILED) {
      return;
    }
    int ready[2], mapped[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(mapped, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      int gpu0 = m;
      if (shape == Shape::kDetachedMount) {
        ::close(o);
        gpu0 = open_through_detached_mount(dir, paths_[0], m);
      }
      if (shape == Shape::kSubordinateUid) enter_user_namespace(ready[1], mapped[0]);
      run(shape, gpu0, ready[1]);
    }
    ::close(mapped[0]);
    if (shape == Shape::kSubordinateUid) {
      // As newuidmap does for the user: its namespace's root is its
      // subordinate uid.
      char byte = 0;
      const std::string map = "0 " + std::to_string(uid() + kSubordinateOffset) + " 1";
      const std::string proc = "/proc/" + std::to_string(pid_);
      const bool ok = ::read(ready[0], &byte, 1) == 1 && std::ofstream(proc + "/uid_map") << map &&
                      std::ofstream(proc + "/gid_map") << map;
      if (!ok || ::write(mapped[1], "m", 1) != 1) {
        ::close(mapped[1]);
        return;
      }
    }
    ::close(mapped[1]);
    ::close(ready[1]);
    char byte = 0;
    ready_ = pid_ > 0 && ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    ::close(m);
    ::close(o);
    ::close(shim);
  }
  ~ScannedChild() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (const auto& p : paths_)
      std::filesystem::remove(p);
  }
  bool ready() const { return ready_; }
  pid_t pid() const { return pid_; }
  uid_t uid() const { return geteuid() == 0 ? 4244 : geteuid(); }
  GpuProcessScanRequest request() const {
    GpuProcessScanRequest r;
    r.uids = {uid()};
    r.devices = device_files({paths_[0], paths_[1]});
    r.shims = device_files({paths_[2]});
    return r;
  }
  // The scan's sighting of this child; none: gpus empty.
  model::GpuProcessSighting sighting(const GpuProcessScanRequest& r) const {
    ScanProgress progress;
    progress.pid = -1;
    model::GpuProcessSighting found;
    const auto sightings = scan_gpu_processes(r, &progress);
    for (const auto& s : sightings) {
      if (s.pid == pid_) found = s;
    }
    EXPECT_EQ(progress.pid.load(), 0);
    EXPECT_EQ(progress.found.size(), sightings.size());
    return found;
  }

 private:
  // In the child: as the user, a user namespace of its own, whose root is
  // then mapped to the subordinate uid by the parent (`ready`: unshared;
  // `mapped`: the maps are written).
  void enter_user_namespace(int ready, int mapped) {
    char byte = 0;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(uid(), uid(), uid()) != 0 ||
        ::setresuid(uid(), uid(), uid()) != 0 || ::unshare(CLONE_NEWUSER) != 0 ||
        ::write(ready, "u", 1) != 1 || ::read(mapped, &byte, 1) != 1 || ::setresgid(0, 0, 0) != 0 ||
        ::setresuid(0, 0, 0) != 0) {
      ::_exit(1);
    }
  }

  [[noreturn]] void run(Shape shape, int mapped, int ready) {
    if (::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, mapped, 0) == MAP_FAILED) ::_exit(1);
    if (shape == Shape::kOddName) ::prctl(PR_SET_NAME, "a) b\n1 2 3", 0, 0, 0);
    if (shape != Shape::kSubordinateUid && geteuid() == 0 &&
        (::setgid(uid()) != 0 || ::setuid(uid()) != 0)) {
      ::_exit(1);
    }
    if (shape == Shape::kLeaderExited) {
      // Another thread carries on; the leader exits (its own /proc entries
      // read empty from then on).
      static int ready_fd = ready;
      pthread_t t;
      if (pthread_create(
              &t, nullptr,
              [](void*) -> void* {
                // Ready once the leader is a zombie (60 s at most).
                for (int i = 0; i < 60'000; ++i) {
                  const auto status = read_proc_status(::getpid());
                  if (status && status->zombie) break;
                  usleep(1'000);
                }
                if (::write(ready_fd, "r", 1) != 1) ::_exit(1);
                for (;;)
                  ::pause();
              },
              nullptr) != 0) {
        ::_exit(1);
      }
      // The leader thread alone ends (exit(2), not pthread_exit: no unwinding
      // through the test's frames).
      ::syscall(SYS_exit, 0);
    }
    if (::write(ready, "r", 1) != 1) ::_exit(1);
    for (;;)
      ::pause();
  }

  // In the child: `path` (in `dir`) opened again through a bind mount of
  // `dir` that is then detached, its first descriptor closed: the kernel
  // names the one left "/" + its file name.
  static int open_through_detached_mount(const std::string& dir, const std::string& path,
                                         int first) {
    const std::string bind = dir + "/scan-bind-" + std::to_string(::getpid());
    if (::unshare(CLONE_NEWNS) != 0 ||
        ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mkdir(bind.c_str(), 0700) != 0 ||
        ::mount(dir.c_str(), bind.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      ::_exit(1);
    }
    const int fd = ::open((bind + path.substr(dir.size())).c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0 || ::umount2(bind.c_str(), MNT_DETACH) != 0) ::_exit(1);
    ::rmdir(bind.c_str());
    ::close(first);
    return fd;
  }

  std::vector<std::string> paths_;
  pid_t pid_ = -1;
  bool ready_ = false;
};

TEST(GpuProcessScan, AProcessThatMapsAGpuIsFoundWithItsAncestors) {
  ScannedChild child(ScannedChild::Shape::kPlain);
  ASSERT_TRUE(child.ready());
  const auto s = child.sighting(child.request());
  EXPECT_EQ(s.gpus, std::vector<uint32_t>{0});  // GPU 1's file is only open
  EXPECT_EQ(s.uid, child.uid());
  EXPECT_EQ(s.start_time, process_start_time(child.pid()));
  EXPECT_NE(s.start_time, 0u);
  ASSERT_FALSE(s.ancestors.empty());
  EXPECT_EQ(s.ancestors[0], getpid());
}

// Whether a child here can do what kDetachedMount's does to the mounts (a
// container may forbid it even to root): a mount namespace of its own, and
// a bind mount detached in it.
bool mount_namespaces_work() {
  const std::string dir = ::testing::TempDir();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string bind = dir + "/scan-probe-" + std::to_string(::getpid());
    const bool ok = ::unshare(CLONE_NEWNS) == 0 &&
                    ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
                    ::mkdir(bind.c_str(), 0700) == 0 &&
                    ::mount(dir.c_str(), bind.c_str(), nullptr, MS_BIND, nullptr) == 0 &&
                    ::umount2(bind.c_str(), MNT_DETACH) == 0;
    ::rmdir(bind.c_str());
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

// A process in its own mount namespace opens the device through a mount it
// then detaches (umount -l): its descriptor names "/scan-gpu0-...", which
// ends in no device's path, and before the scan looked at nothing else it
// was skipped without its maps being read, a GPU user never judged.
TEST(GpuProcessScan, AGpuFileOpenedThroughADetachedMountIsStillTheGpu) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root for a mount namespace";
  if (!mount_namespaces_work())
    GTEST_SKIP() << "no mount namespace or bind mount can be made here (a container without "
                    "CAP_SYS_ADMIN, or a seccomp filter): nothing to test";
  ScannedChild child(ScannedChild::Shape::kDetachedMount);
  ASSERT_TRUE(child.ready());
  char link[4096] = {};
  bool hidden = false;
  const std::string fds = "/proc/" + std::to_string(child.pid()) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(fds)) {
    const ssize_t n = ::readlink(e.path().c_str(), link, sizeof link - 1);
    if (n > 0 && std::string_view(link, static_cast<size_t>(n)).starts_with("/scan-gpu0-"))
      hidden = true;
  }
  ASSERT_TRUE(hidden) << "the child's descriptor is not named as the test means";
  const auto s = child.sighting(child.request());
  EXPECT_EQ(s.gpus, std::vector<uint32_t>{0});
  EXPECT_EQ(s.uid, child.uid());
}

// A user's process run as one of its subordinate uids (newuidmap, or
// root in its own user namespace) was never looked at: the scan took only
// the uids that own instances. It is judged as the user that owns its
// namespace, and its own uid is kept for the kill's check.
TEST(GpuProcessScan, AProcessOfASubordinateUidIsItsUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to map a subordinate uid";
  ScannedChild child(ScannedChild::Shape::kSubordinateUid);
  if (!child.ready()) GTEST_SKIP() << "user namespaces cannot be made here";
  const auto status = read_proc_status(child.pid());
  ASSERT_TRUE(status);
  ASSERT_EQ(status->uid, child.uid() + ScannedChild::kSubordinateOffset);
  const auto s = child.sighting(child.request());
  EXPECT_EQ(s.gpus, std::vector<uint32_t>{0});
  EXPECT_EQ(s.uid, child.uid());
  EXPECT_EQ(s.process_uid, child.uid() + ScannedChild::kSubordinateOffset);
}

TEST(GpuProcessScan, AttachedProcessesAndTheirDescendantsWithTheShimAreNotSighted) {
  ScannedChild child(ScannedChild::Shape::kWithShim);
  ASSERT_TRUE(child.ready());
  auto r = child.request();
  EXPECT_TRUE(child.sighting(r).maps_shim);  // not attached: sighted, with the shim
  r.attached = {{child.pid(), {0}}};
  EXPECT_TRUE(child.sighting(r).gpus.empty());
  r.attached = {{getpid(), {0}}};  // its parent
  EXPECT_TRUE(child.sighting(r).gpus.empty());
}

// Attached on GPU 1 (its EGPU_* environment naming another GPU of its
// step), it maps GPU 0: sighted, for the watch to judge GPU 0.
TEST(GpuProcessScan, AnAttachmentOnAnotherGpuDoesNotHideAProcess) {
  ScannedChild child(ScannedChild::Shape::kWithShim);
  ASSERT_TRUE(child.ready());
  auto r = child.request();
  for (const pid_t attached : {child.pid(), getpid()}) {
    r.attached = {{attached, {1}}};
    const auto s = child.sighting(r);
    EXPECT_EQ(s.gpus, std::vector<uint32_t>{0}) << attached;
    EXPECT_TRUE(s.maps_shim) << attached;
  }
}

// Attached, then exec'd without LD_PRELOAD (its pid stays attached), or
// forked and exec'd so by an attached process: without the shim, sighted.
TEST(GpuProcessScan, AttachedOrDescendedWithoutTheShimIsSighted) {
  ScannedChild child(ScannedChild::Shape::kPlain);
  ASSERT_TRUE(child.ready());
  auto r = child.request();
  r.attached = {{child.pid(), {0}}};
  auto s = child.sighting(r);
  EXPECT_EQ(s.gpus, std::vector<uint32_t>{0});
  EXPECT_FALSE(s.maps_shim);
  r.attached = {{getpid(), {0}}};
  s = child.sighting(r);
  EXPECT_EQ(s.gpus, std::vector<uint32_t>{0});
  EXPECT_FALSE(s.maps_shim);
}

TEST(GpuProcessScan, AProcessWhoseMapsCouldNotBeReadIsJudgedByItsOpenFiles) {
  ScannedChild child(ScannedChild::Shape::kPlain);
  ASSERT_TRUE(child.ready());
  auto r = child.request();
  r.maps_unreadable = {{child.pid(), process_start_time(child.pid())}};
  EXPECT_EQ(child.sighting(r).gpus, (std::vector<uint32_t>{0, 1}));
  EXPECT_FALSE(child.sighting(r).maps_shim);  // not attached: taken not to map it
  r.attached = {{child.pid(), {0, 1}}};
  EXPECT_TRUE(child.sighting(r).gpus.empty());  // attached: given the benefit of the doubt
  r.attached = {{child.pid(), {0}}};
  EXPECT_EQ(child.sighting(r).gpus, (std::vector<uint32_t>{0, 1}));  // but not on GPU 1
  r.attached = {{child.pid(), {0, 1}}};
  // Another process at that pid (another start time) is read as usual.
  r.maps_unreadable = {{child.pid(), 1}};
  EXPECT_EQ(child.sighting(r).gpus, std::vector<uint32_t>{0});
}

// What the agent makes of a process a scan got stuck on: its open GPUs, and
// the benefit of the doubt on the shim when it or a parent is attached.
TEST(GpuProcessScan, AStuckProcessIsJudgedByItsOpenFilesAndAttachment) {
  ScannedChild child(ScannedChild::Shape::kPlain);
  ASSERT_TRUE(child.ready());
  auto s = stuck_sighting(child.pid(), 0b10, 2, {});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->gpus, std::vector<uint32_t>{1});
  EXPECT_FALSE(s->maps_shim);
  EXPECT_EQ(s->uid, child.uid());
  EXPECT_EQ(s->start_time, process_start_time(child.pid()));
  s = stuck_sighting(child.pid(), 0b11, 2, {{getpid(), {0, 1}}});  // its parent attached
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->gpus, (std::vector<uint32_t>{0, 1}));
  EXPECT_TRUE(s->maps_shim);
  EXPECT_FALSE(stuck_sighting(child.pid(), 0, 2, {}).has_value());  // stuck before its files
  // Its GPUs not known (past kMaxDescriptorsRead): no evidence, no sighting.
  EXPECT_FALSE(stuck_sighting(child.pid(), ~uint64_t{0}, 2, {}).has_value());
}

// A name may hold ") " and a newline: the start time is still the right one
// (it was read as 0 before, and the process taken for gone).
TEST(GpuProcessScan, AnOddProcessNameDoesNotHideIt) {
  double uptime_s = 0;
  std::FILE* uptime = std::fopen("/proc/uptime", "r");
  ASSERT_NE(uptime, nullptr);
  ASSERT_EQ(std::fscanf(uptime, "%lf", &uptime_s), 1);
  std::fclose(uptime);
  ScannedChild child(ScannedChild::Shape::kOddName);
  ASSERT_TRUE(child.ready());
  const auto s = child.sighting(child.request());
  EXPECT_EQ(s.gpus, std::vector<uint32_t>{0});
  // Its start (clock ticks since boot) is when the test started it, not
  // another field of the line.
  const double started_s =
      static_cast<double>(s.start_time) / static_cast<double>(::sysconf(_SC_CLK_TCK));
  EXPECT_GE(started_s, uptime_s - 1);
  EXPECT_LE(started_s, uptime_s + 30);
}

// A process whose first thread exited has empty /proc/PID/fd and maps: it
// is read through a thread still running.
TEST(GpuProcessScan, AProcessWhoseLeaderExitedIsReadThroughAThreadOfIt) {
  ScannedChild child(ScannedChild::Shape::kLeaderExited);
  ASSERT_TRUE(child.ready());
  EXPECT_EQ(child.sighting(child.request()).gpus, std::vector<uint32_t>{0});
}

}  // namespace
}  // namespace egpu::agent
