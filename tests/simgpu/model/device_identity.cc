#include "model/device_identity.h"

#include <cstdio>

namespace egpu::simgpu {

std::string pci_bus_id_string(uint8_t bus) {
  char text[16];
  std::snprintf(text, sizeof text, "0000:%02x:00.0", bus);
  return text;
}

std::array<uint8_t, 16> uuid_bytes(uint32_t index, uint8_t bus) {
  return {0x5e,
          0xed,
          static_cast<uint8_t>(index >> 8),
          static_cast<uint8_t>(index),
          0x00,
          0x00,
          0x40,
          0x00,
          0x80,
          0x00,
          0x00,
          0x00,
          0x00,
          0x00,
          0x00,
          bus};
}

std::string uuid_string(uint32_t index, uint8_t bus) {
  const std::array<uint8_t, 16> b = uuid_bytes(index, bus);
  char text[48];
  std::snprintf(text, sizeof text,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return text;
}

}  // namespace egpu::simgpu
