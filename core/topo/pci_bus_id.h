// PCI bus ids ("dddd:bb:dd.f"): parsing and one canonical spelling, so ids from
// hwloc ("0000:1b:00.0") and NVML ("00000000:1B:00.0") compare equal.
#ifndef EGPU_CORE_TOPO_PCI_BUS_ID_H
#define EGPU_CORE_TOPO_PCI_BUS_ID_H

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace egpu::topo {

struct PciAddress {
  uint32_t domain = 0;
  uint8_t bus = 0;
  uint8_t device = 0;
  uint8_t function = 0;

  auto operator<=>(const PciAddress&) const = default;
};

// Accepts "domain:bus:device.function" (domain up to 8 hex digits, any case)
// or "bus:device.function" (domain 0). nullopt when it is not a bus id.
std::optional<PciAddress> parse_pci_bus_id(std::string_view text);

// "0000:1b:00.0": lower case, domain at least 4 digits (more when it needs them).
std::string format_pci_bus_id(const PciAddress& address);

// parse + format; nullopt when text is not a bus id.
std::optional<std::string> normalize_pci_bus_id(std::string_view text);

}  // namespace egpu::topo

#endif
