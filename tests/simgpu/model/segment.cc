#include "model/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "model/board_lock.h"
#include "model/memory_table.h"
#include "model/process_identity.h"
#include "model/timeline.h"

namespace egpu::simgpu {
namespace {

constexpr size_t kPage = 4096;
constexpr uint64_t kInitWaitNs = 2'000'000'000;  // how long attachers wait for the creator
constexpr int kOpenAttempts = 4;

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

size_t devices_offset() {
  return round_up(sizeof(SegmentHeader), kPage);
}

// The board follows the devices, so the header (what attachers read first,
// of any layout version) stays small.
size_t board_offset(uint32_t device_count) {
  return round_up(devices_offset() + sizeof(DeviceShared) * device_count, kPage);
}

std::string errno_text(const char* what, const std::string& name) {
  return std::string(what) + " " + name + ": " + std::strerror(errno);
}

// A file descriptor closed on every path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

bool init_device(DeviceShared& dev, uint32_t index, const SegmentConfig& config, uint64_t now) {
  pthread_mutexattr_t attr;
  if (pthread_mutexattr_init(&attr) != 0) return false;
  pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
  const int rc = pthread_mutex_init(&dev.mutex, &attr);
  pthread_mutexattr_destroy(&attr);
  if (rc != 0) return false;
  dev.lock_holder_pid = 0;
  dev.last_liveness_check_ns = 0;
  init_timeline(dev.timeline, config.timeslice_ns, now);
  const uint64_t base = uint64_t{index + 1} << kDeviceRangeShift;
  init_memory(dev.memory, config.memory_bytes, base, base + (uint64_t{1} << kDeviceRangeShift));
  return true;
}

uint32_t load_acquire(const uint32_t& flag) {
  // atomic_ref needs a non-const object; this only loads.
  return std::atomic_ref<uint32_t>(const_cast<uint32_t&>(flag)).load(std::memory_order_acquire);
}

enum class Outcome { kDone, kRetry, kFailed };

Outcome create(const SimConfig& config, void** base, size_t* bytes, std::string* error) {
  const Fd fd(::shm_open(config.shm_name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC,
                         static_cast<mode_t>(config.shm_mode)));
  if (fd.get() < 0) {
    if (errno == EEXIST) return Outcome::kRetry;
    *error = errno_text("shm_open(create)", config.shm_name);
    return Outcome::kFailed;
  }
  ::fchmod(fd.get(), static_cast<mode_t>(config.shm_mode));  // exact mode, whatever the umask
  const size_t size = segment_bytes(config.device_count);
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    *error = errno_text("ftruncate", config.shm_name);
    ::shm_unlink(config.shm_name.c_str());
    return Outcome::kFailed;
  }
  void* map = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) {
    *error = errno_text("mmap", config.shm_name);
    ::shm_unlink(config.shm_name.c_str());
    return Outcome::kFailed;
  }
  auto* header = static_cast<SegmentHeader*>(map);
  header->creator_pid =
      static_cast<int32_t>(::getpid());  // first: lets waiters spot a dead creator
  header->magic = kSegmentMagic;
  header->layout_version = kLayoutVersion;
  header->total_bytes = size;
  header->devices_offset = devices_offset();
  header->created_ns = monotonic_ns();
  header->next_va = kVaBase;
  header->board_offset = board_offset(config.device_count);
  header->config = to_segment_config(config);
  auto* board = reinterpret_cast<CollectiveBoard*>(static_cast<char*>(map) + header->board_offset);
  if (!init_shared_board(*board)) {
    *error = "pthread_mutex_init failed for the collective board";
    ::munmap(map, size);
    ::shm_unlink(config.shm_name.c_str());
    return Outcome::kFailed;
  }
  auto* devices = reinterpret_cast<DeviceShared*>(static_cast<char*>(map) + devices_offset());
  for (uint32_t i = 0; i < config.device_count; ++i) {
    if (!init_device(devices[i], i, header->config, header->created_ns)) {
      *error = "pthread_mutex_init failed for device " + std::to_string(i);
      ::munmap(map, size);
      ::shm_unlink(config.shm_name.c_str());
      return Outcome::kFailed;
    }
  }
  std::atomic_ref<uint32_t>(header->initialised).store(1, std::memory_order_release);
  *base = map;
  *bytes = size;
  return Outcome::kDone;
}

// Opens a segment for reading and writing. One another user is creating has
// its creator's umask's mode until the fchmod right after its creation:
// EACCES for that long is not a refusal. -1 with errno set otherwise.
int open_segment(const std::string& name) {
  const uint64_t deadline = monotonic_ns() + kInitWaitNs;
  for (;;) {
    const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
    if (fd >= 0 || errno != EACCES || monotonic_ns() > deadline) return fd;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// Waits for a complete segment and maps all of it. kRetry: it was stale (its
// creator died before finishing) or vanished, and may be created again.
Outcome attach_existing(const std::string& name, bool may_unlink_stale, void** base, size_t* bytes,
                        std::string* error) {
  const Fd fd(open_segment(name));
  if (fd.get() < 0) {
    if (errno == ENOENT && may_unlink_stale) return Outcome::kRetry;
    *error = errno_text("shm_open", name);
    return Outcome::kFailed;
  }
  const uint64_t deadline = monotonic_ns() + kInitWaitNs;
  const size_t header_bytes = devices_offset();
  void* header_map = MAP_FAILED;
  bool stale = false;
  for (;;) {
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) {
      *error = errno_text("fstat", name);
      return Outcome::kFailed;
    }
    if (header_map == MAP_FAILED && static_cast<size_t>(st.st_size) >= header_bytes) {
      header_map = ::mmap(nullptr, header_bytes, PROT_READ, MAP_SHARED, fd.get(), 0);
    }
    const auto* header = static_cast<const SegmentHeader*>(header_map);
    if (header_map != MAP_FAILED) {
      if (load_acquire(header->initialised) != 0) break;
      const ProcessIdentity creator{header->creator_pid, 0, 0};
      if (header->creator_pid != 0 && !process_alive(creator)) {
        // It may have finished and exited since the look above (a short
        // program does): only a creator that died unfinished leaves it stale.
        stale = load_acquire(header->initialised) == 0;
        break;
      }
    }
    if (monotonic_ns() > deadline) {
      stale = header_map == MAP_FAILED || load_acquire(header->initialised) == 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  uint64_t total = 0;
  if (!stale) {
    const auto* header = static_cast<const SegmentHeader*>(header_map);
    if (header->magic != kSegmentMagic || header->layout_version != kLayoutVersion ||
        header->devices_offset != header_bytes || header->config.device_count == 0 ||
        header->config.device_count > kMaxDevices ||
        header->total_bytes != segment_bytes(header->config.device_count) ||
        header->board_offset != board_offset(header->config.device_count)) {
      *error = "shm segment " + name + " has another layout (an older simgpu?); remove it with " +
               "simgpu-stat --shm " + name + " --unlink";
      ::munmap(header_map, header_bytes);
      return Outcome::kFailed;
    }
    total = header->total_bytes;
  }
  if (header_map != MAP_FAILED) ::munmap(header_map, header_bytes);
  if (stale) {
    if (!may_unlink_stale) {
      *error = "shm segment " + name + " was never initialised (its creator died)";
      return Outcome::kFailed;
    }
    ::shm_unlink(name.c_str());
    return Outcome::kRetry;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || static_cast<uint64_t>(st.st_size) < total) {
    *error = "shm segment " + name + " is shorter than its header says";
    return Outcome::kFailed;
  }
  void* map = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) {
    *error = errno_text("mmap", name);
    return Outcome::kFailed;
  }
  *base = map;
  *bytes = total;
  return Outcome::kDone;
}

}  // namespace

size_t segment_bytes(uint32_t device_count) {
  return round_up(board_offset(device_count) + sizeof(CollectiveBoard), kPage);
}

Segment::Segment(std::string name, void* base, size_t bytes, bool created_here)
    : name_(std::move(name)), base_(base), bytes_(bytes), created_here_(created_here) {}

Segment::~Segment() {
  ::munmap(base_, bytes_);
}

std::unique_ptr<Segment> Segment::open_or_create(const SimConfig& config, std::string* error) {
  for (int attempt = 0; attempt < kOpenAttempts; ++attempt) {
    void* base = nullptr;
    size_t bytes = 0;
    Outcome outcome = create(config, &base, &bytes, error);
    bool created = outcome == Outcome::kDone;
    if (outcome == Outcome::kRetry) {
      outcome = attach_existing(config.shm_name, true, &base, &bytes, error);
    }
    if (outcome == Outcome::kDone) {
      std::unique_ptr<Segment> segment(new Segment(config.shm_name, base, bytes, created));
      return segment->attach_fabric(error) ? std::move(segment) : nullptr;
    }
    if (outcome == Outcome::kFailed) return nullptr;
  }
  *error = "could not create or attach shm segment " + config.shm_name;
  return nullptr;
}

std::unique_ptr<Segment> Segment::attach(const std::string& name, std::string* error) {
  void* base = nullptr;
  size_t bytes = 0;
  if (attach_existing(name, false, &base, &bytes, error) != Outcome::kDone) return nullptr;
  std::unique_ptr<Segment> segment(new Segment(name, base, bytes, false));
  return segment->attach_fabric(error) ? std::move(segment) : nullptr;
}

bool Segment::attach_fabric(std::string* error) {
  const SegmentConfig& c = config();
  const std::string fabric(c.fabric_name, strnlen(c.fabric_name, sizeof c.fabric_name));
  if (fabric.empty()) return true;
  fabric_ = Fabric::open_or_create(fabric, c.shm_mode, error);
  return fabric_ != nullptr;
}

CollectiveBoard& Segment::board() const {
  if (fabric_) return fabric_->board();
  return *reinterpret_cast<CollectiveBoard*>(static_cast<char*>(base_) + header().board_offset);
}

DeviceShared& Segment::device(uint32_t index) const {
  auto* devices =
      reinterpret_cast<DeviceShared*>(static_cast<char*>(base_) + header().devices_offset);
  return devices[index];
}

uint64_t Segment::reserve_va(uint64_t size, uint64_t alignment) const {
  if (alignment == 0) alignment = 1;
  std::atomic_ref<uint64_t> next(header().next_va);
  uint64_t current = next.load(std::memory_order_relaxed);
  for (;;) {
    const uint64_t start = (current + alignment - 1) / alignment * alignment;
    if (start < current || start > kVaLimit || kVaLimit - start < size) return 0;
    if (next.compare_exchange_weak(current, start + size, std::memory_order_relaxed)) {
      return start;
    }
  }
}

bool unlink_segment(const std::string& name) {
  // The device files beside it (config.h's device_file_path), of any device.
  for (uint32_t physical = 0; physical < kMaxDevices; ++physical)
    ::unlink(device_file_path(name, physical).c_str());
  return ::shm_unlink(name.c_str()) == 0;
}

}  // namespace egpu::simgpu
