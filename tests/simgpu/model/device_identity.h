// How a simulated device presents itself: PCI bus id and UUID, derived from
// its index and PCI bus so they match the emulated hwloc topologies in tests
// (UUID GPU-5eed<index>-0000-4000-8000-<bus>).
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace egpu::simgpu {

std::string pci_bus_id_string(uint8_t bus);  // "0000:1b:00.0"

std::array<uint8_t, 16> uuid_bytes(uint32_t index, uint8_t bus);

std::string uuid_string(uint32_t index, uint8_t bus);  // "GPU-5eed0000-0000-4000-8000-00000000001b"

}  // namespace egpu::simgpu
