#include "driver/driver_state.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "model/config.h"
#include "model/device_identity.h"
#include "model/process_identity.h"

namespace egpu::simgpu::driver {

Driver& Driver::get() {
  static Driver* instance = new Driver();
  return *instance;
}

CUresult Driver::initialise() {
  if (ready()) return CUDA_SUCCESS;
  std::lock_guard lock(init_mutex_);
  if (attempted_) return init_result_;
  attempted_ = true;
  init_result_ = initialise_locked();
  if (init_result_ == CUDA_SUCCESS) ready_.store(true, std::memory_order_release);
  return init_result_;
}

CUresult Driver::initialise_locked() {
  std::string error;
  const auto config = config_from_environment(&error);
  if (!config) {
    std::fprintf(stderr, "simgpu: %s\n", error.c_str());
    return CUDA_ERROR_INVALID_VALUE;
  }
  segment_ = Segment::open_or_create(*config, &error);
  if (!segment_) {
    std::fprintf(stderr, "simgpu: %s\n", error.c_str());
    return CUDA_ERROR_OPERATING_SYSTEM;
  }
  self_ = self_identity();
  label_ = process_label();
  parse_visible_devices();
  map_device_files(*config);
  if (const char* stall = std::getenv("SIMGPU_DEBUG_STALL_IN_DRIVER_MS")) {
    stall_ms_ = static_cast<uint32_t>(std::strtoul(stall, nullptr, 10));
    stall_pending_.store(stall_ms_ > 0);
  }
  if (const char* marker = std::getenv("SIMGPU_DEBUG_STALL_MARKER")) stall_marker_ = marker;
  if (const char* at = std::getenv("SIMGPU_DEBUG_STALL_AT");
      at != nullptr && std::strcmp(at, "ipc-open") == 0) {
    stall_at_ = StallAt::kIpcOpen;
  }
  return visible_.empty() ? CUDA_ERROR_NO_DEVICE : CUDA_SUCCESS;
}

// Like the real driver: a list of indices or UUIDs (a unique prefix of
// "GPU-..."); the first invalid or repeated entry ends the list.
void Driver::parse_visible_devices() {
  const uint32_t count = segment_->device_count();
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (env == nullptr) {
    for (uint32_t i = 0; i < count; ++i)
      visible_.push_back(i);
    return;
  }
  std::string_view rest(env);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    std::string item(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    const size_t first = item.find_first_not_of(" \t");
    const size_t last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? std::string() : item.substr(first, last - first + 1);
    int found = -1;
    if (item.rfind("GPU-", 0) == 0) {
      for (uint32_t i = 0; i < count; ++i) {
        if (uuid_string(i, segment_->config().pci_bus[i]).rfind(item, 0) == 0) {
          if (found >= 0) {  // ambiguous prefix
            found = -1;
            break;
          }
          found = static_cast<int>(i);
        }
      }
    } else if (!item.empty()) {
      char* end = nullptr;
      const long value = std::strtol(item.c_str(), &end, 10);
      if (*end == '\0' && value >= 0 && value < static_cast<long>(count)) {
        found = static_cast<int>(value);
      }
    }
    if (found < 0 || ordinal_of(static_cast<uint32_t>(found)) >= 0) break;
    visible_.push_back(static_cast<uint32_t>(found));
  }
}

// The real driver holds each GPU it uses open (/dev/nvidiaN) and maps it
// into the process: what the agent looks for to find processes that use a
// GPU without the shim. simgpu maps one file per visible device beside its
// segment, /dev/shm/<segment>.gpu<N> (device_file_path), read-only and for
// the process's life. Opened before it is created: in a sticky /dev/shm a
// create-or-open of another user's file is refused (protected_regular).
void Driver::map_device_files(const SimConfig& config) const {
  const long page = ::sysconf(_SC_PAGESIZE);
  for (const uint32_t physical : visible_) {
    const std::string path = device_file_path(config.shm_name, physical);
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
      // Made whole under a name of its own, then linked into place: a file
      // at `path` always has its page (another process may be making it too).
      const std::string temp = path + ".new." + std::to_string(::getpid());
      const int made = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (made >= 0) {
        (void)::fchmod(made, static_cast<mode_t>(config.shm_mode) & 0644);
        // A link that fails (EEXIST: another process was first) is fine.
        [[maybe_unused]] const int linked =
            ::ftruncate(made, page) == 0 ? ::link(temp.c_str(), path.c_str()) : -1;
        ::close(made);
        ::unlink(temp.c_str());
      }
      fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) continue;  // no file: the process looks like one not using the GPU
    // Held open and mapped for the process's life, as the driver holds its
    // device files (so the descriptor is deliberately never closed).
    (void)::mmap(nullptr, static_cast<size_t>(page), PROT_READ, MAP_SHARED, fd, 0);
  }
}

int Driver::ordinal_of(uint32_t physical) const {
  for (size_t i = 0; i < visible_.size(); ++i) {
    if (visible_[i] == physical) return static_cast<int>(i);
  }
  return -1;
}

bool Driver::take_stall(StallAt at, uint32_t* stall_ms) {
  if (at != stall_at_ || !stall_pending_.load(std::memory_order_relaxed)) return false;
  if (!stall_pending_.exchange(false)) return false;
  *stall_ms = stall_ms_;
  if (!stall_marker_.empty()) {
    const int fd = ::open(stall_marker_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);
  }
  return true;
}

}  // namespace egpu::simgpu::driver
