#include "model/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "model/fabric.h"

namespace egpu::simgpu {
namespace {

// Bus numbers of tests' dgx-h100-like topology, so UUIDs and PCI ids agree
// with the emulated hwloc machine by default.
constexpr uint8_t kDgxH100Buses[8] = {0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf};

bool parse_u64(const char* text, int base, uint64_t* out) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text, &end, base);
  if (errno != 0 || end == text || *end != '\0' || text[0] == '-') return false;
  *out = value;
  return true;
}

// Reads an unsigned variable in [lo, hi]; absent leaves *out unchanged.
bool read_ranged(const EnvLookup& env, const char* name, uint64_t lo, uint64_t hi, int base,
                 uint64_t* out, std::string* error) {
  const char* text = env(name);
  if (text == nullptr) return true;
  uint64_t value = 0;
  if (!parse_u64(text, base, &value) || value < lo || value > hi) {
    *error = std::string(name) + "='" + text + "': expected an integer in [" + std::to_string(lo) +
             ", " + std::to_string(hi) + "]";
    return false;
  }
  *out = value;
  return true;
}

bool parse_buses(const char* text, std::vector<uint8_t>* buses, std::string* error) {
  std::string_view rest(text);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item(rest.substr(0, comma));
    uint64_t value = 0;
    if (!parse_u64(item.c_str(), 16, &value) || value > 0xff) {
      *error = "SIMGPU_PCI_BUSES: '" + item + "' is not a hex bus number (00-ff)";
      return false;
    }
    buses->push_back(static_cast<uint8_t>(value));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return true;
}

}  // namespace

std::string default_shm_name() {
  return "/simgpu-" + std::to_string(::getuid());
}

std::string device_file_path(const std::string& shm_name, uint32_t physical) {
  return "/dev/shm" + shm_name + ".gpu" + std::to_string(physical);
}

uint8_t default_pci_bus(uint32_t index) {
  if (index < 8) return kDgxH100Buses[index];
  return static_cast<uint8_t>(0xe0 + (index - 8));
}

std::optional<SimConfig> parse_config(const EnvLookup& env, std::string* error) {
  SimConfig config;
  const char* shm = env("SIMGPU_SHM");
  config.shm_name = (shm != nullptr && *shm != '\0') ? shm : default_shm_name();
  if (config.shm_name[0] != '/' || config.shm_name.size() > 200 ||
      config.shm_name.find('/', 1) != std::string::npos) {
    *error = "SIMGPU_SHM='" + config.shm_name + "': expected /name without further slashes";
    return std::nullopt;
  }
  uint64_t devices = config.device_count;
  uint64_t memory_mb = config.memory_bytes >> 20;
  uint64_t slice_us = config.timeslice_ns / 1000;
  uint64_t mode = config.shm_mode;
  if (!read_ranged(env, "SIMGPU_DEVICES", 1, kMaxDevices, 10, &devices, error) ||
      !read_ranged(env, "SIMGPU_MEMORY_MB", 1, uint64_t{1} << 30, 10, &memory_mb, error) ||
      !read_ranged(env, "SIMGPU_TIMESLICE_US", 1, 10'000'000, 10, &slice_us, error) ||
      !read_ranged(env, "SIMGPU_SHM_MODE", 0, 0777, 8, &mode, error)) {
    return std::nullopt;
  }
  config.device_count = static_cast<uint32_t>(devices);
  config.memory_bytes = memory_mb << 20;
  config.timeslice_ns = slice_us * 1000;
  config.shm_mode = static_cast<uint32_t>(mode);
  if (const char* name = env("SIMGPU_DEVICE_NAME"); name != nullptr && *name != '\0') {
    if (std::strlen(name) >= kDeviceNameBytes) {
      *error = "SIMGPU_DEVICE_NAME is longer than " + std::to_string(kDeviceNameBytes - 1);
      return std::nullopt;
    }
    config.device_name = name;
  }
  if (const char* buses = env("SIMGPU_PCI_BUSES"); buses != nullptr && *buses != '\0') {
    if (!parse_buses(buses, &config.pci_bus, error)) return std::nullopt;
  }
  if (const char* fabric = env("SIMGPU_FABRIC"); fabric != nullptr && *fabric != '\0') {
    config.fabric_name = fabric;
    if (!valid_fabric_name(config.fabric_name)) {
      *error = "SIMGPU_FABRIC='" + config.fabric_name + "': expected /name without further " +
               "slashes, shorter than " + std::to_string(kFabricNameBytes) + " bytes";
      return std::nullopt;
    }
  }
  for (uint32_t i = static_cast<uint32_t>(config.pci_bus.size()); i < config.device_count; ++i) {
    config.pci_bus.push_back(default_pci_bus(i));
  }
  config.pci_bus.resize(config.device_count);
  return config;
}

std::optional<SimConfig> config_from_environment(std::string* error) {
  return parse_config([](const char* name) { return std::getenv(name); }, error);
}

SegmentConfig to_segment_config(const SimConfig& config) {
  SegmentConfig out{};
  out.device_count = config.device_count;
  out.shm_mode = config.shm_mode;
  out.memory_bytes = config.memory_bytes;
  out.timeslice_ns = config.timeslice_ns;
  std::memcpy(out.device_name, config.device_name.data(),
              std::min(config.device_name.size(), sizeof out.device_name - 1));
  for (uint32_t i = 0; i < config.device_count && i < kMaxDevices; ++i) {
    out.pci_bus[i] = config.pci_bus[i];
  }
  std::memcpy(out.fabric_name, config.fabric_name.data(),
              std::min(config.fabric_name.size(), sizeof out.fabric_name - 1));
  return out;
}

}  // namespace egpu::simgpu
