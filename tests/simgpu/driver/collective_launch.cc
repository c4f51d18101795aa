#include "driver/collective_launch.h"

#include "driver/cuda_api.h"
// after cuda.h:
#include <cstring>
#include <map>
#include <mutex>
#include <utility>

namespace egpu::simgpu::driver {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64's finaliser: every input bit moves every output bit
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::pair<const char*, size_t> param_buffer(void** extra) {
  if (extra == nullptr) return {nullptr, 0};
  const void* buffer = nullptr;
  size_t size = 0;
  for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END && i < 64; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) buffer = extra[i + 1];
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) {
      std::memcpy(&size, extra[i + 1], sizeof size);
    }
  }
  return {static_cast<const char*>(buffer), buffer == nullptr ? 0 : size};
}

bool is_collective_kernel_name(std::string_view name) {
  return name.starts_with("ncclDevKernel") || name.starts_with("simgpu_collective");
}

std::optional<CollectiveArgs> collective_args(void** kernel_params, void** extra) {
  CollectiveArgs args;
  if (kernel_params != nullptr) {
    if (kernel_params[0] == nullptr || kernel_params[1] == nullptr || kernel_params[2] == nullptr) {
      return std::nullopt;
    }
    std::memcpy(&args.communicator, kernel_params[1], sizeof args.communicator);
    std::memcpy(&args.size, kernel_params[2], sizeof args.size);
  } else if (extra != nullptr) {
    const auto [buffer, size] = param_buffer(extra);
    if (buffer == nullptr || size < 16 + sizeof args.size) return std::nullopt;
    std::memcpy(&args.communicator, buffer + 8, sizeof args.communicator);
    std::memcpy(&args.size, buffer + 16, sizeof args.size);
  }
  if (args.communicator == 0 || args.size < 2) return std::nullopt;
  return args;
}

uint64_t next_group_key(uint64_t communicator, uint32_t physical) {
  static std::mutex mutex;
  // Never freed: threads may still launch while the process exits.
  static auto* sequences = new std::map<std::pair<uint64_t, uint32_t>, uint64_t>();
  uint64_t seq = 0;
  {
    const std::lock_guard lock(mutex);
    seq = ++(*sequences)[{communicator, physical}];
  }
  const uint64_t key = mix(mix(communicator) ^ seq);
  return key != 0 ? key : 1;
}

}  // namespace egpu::simgpu::driver
