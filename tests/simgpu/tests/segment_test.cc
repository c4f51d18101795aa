// The shared segment across processes: race-free creation, stale segments,
// recovery from a process that died holding a device lock.
#include "model/segment.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "model/device_lock.h"
#include "model/memory_table.h"
#include "model/process_identity.h"
#include "model/timeline.h"
#include "test_segment_name.h"

namespace egpu::simgpu {
namespace {

using testing::ScopedSegmentName;

SimConfig config_for(const std::string& name, uint32_t devices = 1, uint64_t memory_mb = 1024) {
  SimConfig c;
  c.shm_name = name;
  c.device_count = devices;
  c.memory_bytes = memory_mb << 20;
  for (uint32_t i = 0; i < devices; ++i)
    c.pci_bus.push_back(default_pci_bus(i));
  return c;
}

// A pid that certainly belongs to no live process: a child already reaped.
int32_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return static_cast<int32_t>(child);
}

int exit_code(pid_t child) {
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Segment, CreateThenAttachSeesTheSameConfig) {
  const ScopedSegmentName name("attach");
  std::string error;
  auto created = Segment::open_or_create(config_for(name.name(), 3, 512), &error);
  ASSERT_TRUE(created) << error;
  EXPECT_TRUE(created->created_here());
  // A later process's own configuration is ignored: the segment's wins.
  auto again = Segment::open_or_create(config_for(name.name(), 1, 64), &error);
  ASSERT_TRUE(again) << error;
  EXPECT_FALSE(again->created_here());
  EXPECT_EQ(again->device_count(), 3u);
  EXPECT_EQ(again->device(2).memory.total_bytes, uint64_t{512} << 20);
  EXPECT_EQ(again->device(1).memory.next_address, uint64_t{2} << kDeviceRangeShift);
  auto attached = Segment::attach(name.name(), &error);
  ASSERT_TRUE(attached) << error;
  EXPECT_EQ(attached->config().pci_bus[2], 0x52);
}

TEST(Segment, AttachWithoutSegmentFails) {
  const ScopedSegmentName name("missing");
  std::string error;
  EXPECT_FALSE(Segment::attach(name.name(), &error));
  EXPECT_NE(error.find(name.name()), std::string::npos);
}

TEST(Segment, ConcurrentCreatorsAgreeOnOneSegment) {
  const ScopedSegmentName name("race");
  constexpr int kChildren = 6;
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  pid_t children[kChildren];
  for (int i = 0; i < kChildren; ++i) {
    children[i] = ::fork();
    if (children[i] == 0) {
      ::close(go[1]);
      char byte;
      while (::read(go[0], &byte, 1) < 0) {
      }
      std::string error;
      auto seg =
          Segment::open_or_create(config_for(name.name(), static_cast<uint32_t>(i + 1)), &error);
      if (!seg) ::_exit(99);
      // created flag + the device count everyone must agree on
      ::_exit((seg->created_here() ? 100 : 0) + static_cast<int>(seg->device_count()));
    }
  }
  ::close(go[0]);
  ::close(go[1]);  // EOF releases all children at once
  int creators = 0;
  int creator_devices = -1;
  std::vector<int> devices;
  for (int i = 0; i < kChildren; ++i) {
    const int code = exit_code(children[i]);
    ASSERT_NE(code, 99);
    if (code >= 100) {
      ++creators;
      creator_devices = code - 100;
      EXPECT_EQ(creator_devices, i + 1);  // the creator's own configuration
    }
    devices.push_back(code % 100);
  }
  EXPECT_EQ(creators, 1);
  for (int d : devices)
    EXPECT_EQ(d, creator_devices);
}

TEST(Segment, SegmentWhoseCreatorDiedUnfinishedIsReplaced) {
  const ScopedSegmentName name("unfinished");
  {
    const int fd = ::shm_open(name.name().c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 4096), 0);
    void* map = ::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(map, MAP_FAILED);
    static_cast<SegmentHeader*>(map)->creator_pid = dead_pid();  // never initialised
    ::munmap(map, 4096);
    ::close(fd);
  }
  std::string error;
  EXPECT_FALSE(Segment::attach(name.name(), &error));
  auto seg = Segment::open_or_create(config_for(name.name(), 2), &error);
  ASSERT_TRUE(seg) << error;
  EXPECT_TRUE(seg->created_here());
  EXPECT_EQ(seg->device_count(), 2u);
}

TEST(Segment, ForeignLayoutIsRefused) {
  const ScopedSegmentName name("foreign");
  {
    const int fd = ::shm_open(name.name().c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 8192), 0);
    void* map = ::mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    auto* header = static_cast<SegmentHeader*>(map);
    header->magic = kSegmentMagic;
    header->layout_version = kLayoutVersion + 100;
    header->creator_pid = static_cast<int32_t>(::getpid());
    header->initialised = 1;
    ::munmap(map, 8192);
    ::close(fd);
  }
  std::string error;
  EXPECT_FALSE(Segment::open_or_create(config_for(name.name()), &error));
  EXPECT_NE(error.find("layout"), std::string::npos) << error;
}

// A complete segment left by processes that all died is used as it is: their
// contexts are retired and their memory freed by the first liveness sweep.
TEST(Segment, StaleSegmentOfDeadProcessesIsUsable) {
  const ScopedSegmentName name("stale");
  const pid_t child = ::fork();
  if (child == 0) {
    std::string error;
    auto seg = Segment::open_or_create(config_for(name.name()), &error);
    if (!seg) ::_exit(1);
    DeviceShared& dev = seg->device(0);
    AllocResult r{};
    {
      const DeviceLock lock(dev);
      const int slot = claim_context(dev.timeline, self_identity(), "gone", monotonic_ns());
      Op op{};
      op.kind = static_cast<uint32_t>(OpKind::kKernel);
      op.remaining_ns = 60'000'000'000;
      enqueue_op(dev.timeline, static_cast<uint32_t>(slot), op);
      r = allocate(dev.memory, 100 << 20, AllocationKind::kDevice,
                   AllocOwner{slot, dev.timeline.contexts[slot].generation,
                              static_cast<int32_t>(::getpid())});
    }
    ::_exit(r.status == AllocStatus::kOk ? 0 : 2);  // without retiring anything
  }
  ASSERT_EQ(exit_code(child), 0);
  std::string error;
  auto seg = Segment::open_or_create(config_for(name.name()), &error);
  ASSERT_TRUE(seg) << error;
  EXPECT_FALSE(seg->created_here());
  DeviceShared& dev = seg->device(0);
  const DeviceLock lock(dev);
  EXPECT_FALSE(lock.recovered());
  EXPECT_EQ(dev.memory.used_bytes, uint64_t{100} << 20);
  bring_to_now(dev, monotonic_ns(), &seg->board());
  EXPECT_EQ(dev.memory.used_bytes, 0u);
  EXPECT_EQ(dev.timeline.contexts[0].state, static_cast<uint32_t>(ContextState::kRetired));
  EXPECT_EQ(dev.timeline.pending_mask, 0u);
  EXPECT_STREQ(dev.timeline.contexts[0].label, "gone");
}

TEST(Segment, LockOfAProcessThatDiedHoldingItIsRecovered) {
  const ScopedSegmentName name("robust");
  std::string error;
  auto seg = Segment::open_or_create(config_for(name.name()), &error);
  ASSERT_TRUE(seg) << error;
  const pid_t child = ::fork();
  if (child == 0) {
    auto mine = Segment::attach(name.name(), &error);
    DeviceShared& dev = mine->device(0);
    pthread_mutex_lock(&dev.mutex);  // and never unlock it
    const int slot = claim_context(dev.timeline, self_identity(), "holder", monotonic_ns());
    allocate(
        dev.memory, 1 << 20, AllocationKind::kDevice,
        AllocOwner{slot, dev.timeline.contexts[slot].generation, static_cast<int32_t>(::getpid())});
    dev.memory.used_bytes += 777;  // as if killed in the middle of an update
    ::_exit(0);
  }
  ASSERT_EQ(exit_code(child), 0);
  DeviceShared& dev = seg->device(0);
  const DeviceLock lock(dev);
  ASSERT_TRUE(lock.held());
  EXPECT_TRUE(lock.recovered());
  EXPECT_EQ(dev.memory.used_bytes, 0u);
  EXPECT_EQ(dev.timeline.contexts[0].state, static_cast<uint32_t>(ContextState::kRetired));
}

TEST(Segment, AddressReservationsAreUniqueAndAligned) {
  const ScopedSegmentName name("va");
  std::string error;
  auto seg = Segment::open_or_create(config_for(name.name()), &error);
  ASSERT_TRUE(seg);
  const uint64_t a = seg->reserve_va(3 << 20, 2 << 20);
  const uint64_t b = seg->reserve_va(2 << 20, 2 << 20);
  EXPECT_GE(a, kVaBase);
  EXPECT_EQ(a % (2 << 20), 0u);
  EXPECT_EQ(b % (2 << 20), 0u);
  EXPECT_GE(b, a + (3 << 20));
}

TEST(ProcessIdentity, ZombiesAndReusedPidsAreDead) {
  EXPECT_TRUE(process_alive(self_identity()));
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  const ProcessIdentity zombie{static_cast<int32_t>(child), 0, 0};
  bool dead = false;
  for (int i = 0; i < 30'000 && !dead; ++i) {  // until it has exited (not yet reaped)
    dead = !process_alive(zombie);
    if (!dead) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(dead);
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_alive(zombie));
  ProcessIdentity other_start = self_identity();
  other_start.start_time += 1;
  EXPECT_FALSE(process_alive(other_start));
}

}  // namespace
}  // namespace egpu::simgpu
