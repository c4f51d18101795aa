#include "core/topo/pci_bus_id.h"

#include <charconv>
#include <cstdio>

namespace egpu::topo {
namespace {

// Parses exactly the hex digits of `field` (1..max_digits of them) into out.
bool parse_hex_field(std::string_view field, size_t max_digits, uint32_t& out) {
  if (field.empty() || field.size() > max_digits) return false;
  auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), out, 16);
  return ec == std::errc() && end == field.data() + field.size();
}

}  // namespace

std::optional<PciAddress> parse_pci_bus_id(std::string_view text) {
  // Split from the right: the function follows the last '.', device and bus
  // precede it separated by ':', the optional domain comes first.
  size_t dot = text.rfind('.');
  if (dot == std::string_view::npos) return std::nullopt;
  std::string_view head = text.substr(0, dot);
  std::string_view function_text = text.substr(dot + 1);

  size_t colon_dev = head.rfind(':');
  if (colon_dev == std::string_view::npos) return std::nullopt;
  std::string_view device_text = head.substr(colon_dev + 1);
  head = head.substr(0, colon_dev);

  std::string_view domain_text;
  std::string_view bus_text = head;
  size_t colon_bus = head.rfind(':');
  if (colon_bus != std::string_view::npos) {
    domain_text = head.substr(0, colon_bus);
    bus_text = head.substr(colon_bus + 1);
  }

  uint32_t domain = 0, bus = 0, device = 0, function = 0;
  if (!domain_text.empty() && !parse_hex_field(domain_text, 8, domain)) return std::nullopt;
  if (!parse_hex_field(bus_text, 2, bus)) return std::nullopt;
  if (!parse_hex_field(device_text, 2, device) || device > 0x1f) return std::nullopt;
  if (!parse_hex_field(function_text, 1, function) || function > 7) return std::nullopt;
  return PciAddress{domain, static_cast<uint8_t>(bus), static_cast<uint8_t>(device),
                    static_cast<uint8_t>(function)};
}

std::string format_pci_bus_id(const PciAddress& address) {
  char text[32];
  std::snprintf(text, sizeof text, "%04x:%02x:%02x.%x", static_cast<unsigned>(address.domain),
                static_cast<unsigned>(address.bus), static_cast<unsigned>(address.device),
                static_cast<unsigned>(address.function));
  return text;
}

std::optional<std::string> normalize_pci_bus_id(std::string_view text) {
  auto address = parse_pci_bus_id(text);
  if (!address) return std::nullopt;
  return format_pci_bus_id(*address);
}

}  // namespace egpu::topo
