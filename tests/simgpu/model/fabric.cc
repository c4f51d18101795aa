#include "model/fabric.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "model/board_lock.h"
#include "model/process_identity.h"

namespace egpu::simgpu {
namespace {

constexpr size_t kBytes = (sizeof(FabricHeader) + 4095) / 4096 * 4096;
constexpr uint64_t kInitWaitNs = 2'000'000'000;  // how long attachers wait for the creator
constexpr int kOpenAttempts = 4;

enum class Outcome { kDone, kRetry, kFailed };

std::string errno_text(const char* what, const std::string& name) {
  return std::string(what) + " " + name + ": " + std::strerror(errno);
}

uint32_t load_acquire(uint32_t& flag) {
  return std::atomic_ref<uint32_t>(flag).load(std::memory_order_acquire);
}

FabricHeader* map_fd(int fd) {
  void* map = ::mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return map == MAP_FAILED ? nullptr : static_cast<FabricHeader*>(map);
}

Outcome create(const std::string& name, uint32_t mode, FabricHeader** out, std::string* error) {
  const int fd =
      ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, static_cast<mode_t>(mode));
  if (fd < 0) {
    if (errno == EEXIST) return Outcome::kRetry;
    *error = errno_text("shm_open(create)", name);
    return Outcome::kFailed;
  }
  ::fchmod(fd, static_cast<mode_t>(mode));  // exact mode, whatever the umask
  FabricHeader* header = ::ftruncate(fd, static_cast<off_t>(kBytes)) == 0 ? map_fd(fd) : nullptr;
  ::close(fd);
  if (header == nullptr) {
    *error = errno_text("ftruncate/mmap", name);
    ::shm_unlink(name.c_str());
    return Outcome::kFailed;
  }
  header->creator_pid = current_pid();  // first: lets waiters spot a dead creator
  header->magic = kFabricMagic;
  header->layout_version = kLayoutVersion;
  if (!init_shared_board(header->board)) {
    *error = "pthread_mutex_init failed for fabric " + name;
    ::munmap(header, kBytes);
    ::shm_unlink(name.c_str());
    return Outcome::kFailed;
  }
  std::atomic_ref<uint32_t>(header->initialised).store(1, std::memory_order_release);
  *out = header;
  return Outcome::kDone;
}

// Waits for the creator to finish. kRetry: gone, or stale (its creator died
// unfinished) and unlinked, so it may be created again.
Outcome attach(const std::string& name, FabricHeader** out, std::string* error) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) return Outcome::kRetry;
    *error = errno_text("shm_open", name);
    return Outcome::kFailed;
  }
  const uint64_t deadline = monotonic_ns() + kInitWaitNs;
  FabricHeader* header = nullptr;
  bool stale = false;
  for (;;) {
    struct stat st {};
    if (header == nullptr && ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= kBytes) {
      header = map_fd(fd);
    }
    if (header != nullptr) {
      if (load_acquire(header->initialised) != 0) break;
      const ProcessIdentity creator{header->creator_pid, 0, 0};
      if (header->creator_pid != 0 && !process_alive(creator)) {
        stale = load_acquire(header->initialised) == 0;  // it may have just finished
        break;
      }
    }
    if (monotonic_ns() > deadline) {
      stale = header == nullptr || load_acquire(header->initialised) == 0;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ::close(fd);
  if (stale) {
    if (header != nullptr) ::munmap(header, kBytes);
    ::shm_unlink(name.c_str());
    return Outcome::kRetry;
  }
  if (header->magic != kFabricMagic || header->layout_version != kLayoutVersion) {
    ::munmap(header, kBytes);
    *error = "shm segment " + name + " is not a simgpu fabric of this version; remove it";
    return Outcome::kFailed;
  }
  *out = header;
  return Outcome::kDone;
}

}  // namespace

std::unique_ptr<Fabric> Fabric::open_or_create(const std::string& name, uint32_t mode,
                                               std::string* error) {
  if (!valid_fabric_name(name)) {
    *error = "fabric name '" + name + "': expected /name without further slashes";
    return nullptr;
  }
  for (int attempt = 0; attempt < kOpenAttempts; ++attempt) {
    FabricHeader* header = nullptr;
    Outcome outcome = create(name, mode, &header, error);
    if (outcome == Outcome::kRetry) outcome = attach(name, &header, error);
    if (outcome == Outcome::kDone) return std::unique_ptr<Fabric>(new Fabric(header));
    if (outcome == Outcome::kFailed) return nullptr;
  }
  *error = "could not create or attach fabric " + name;
  return nullptr;
}

Fabric::~Fabric() {
  ::munmap(header_, kBytes);
}

bool valid_fabric_name(const std::string& name) {
  return name.size() >= 2 && name.size() < kFabricNameBytes && name[0] == '/' &&
         name.find('/', 1) == std::string::npos;
}

bool unlink_fabric(const std::string& name) {
  return ::shm_unlink(name.c_str()) == 0;
}

}  // namespace egpu::simgpu
