#include "core/config/byte_size.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace egpu::config {
namespace {

// Returns the power of 1024 for a unit suffix, or -1 when it is not one.
int unit_power(std::string unit) {
  for (char& c : unit)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.empty() || unit == "B") return 0;
  static constexpr const char* kPrefixes = "KMGTPE";
  if (unit.size() > 3) return -1;
  const auto* p = std::char_traits<char>::find(kPrefixes, 6, unit[0]);
  if (p == nullptr) return -1;
  std::string rest = unit.substr(1);
  if (rest.empty() || rest == "B" || rest == "IB") return static_cast<int>(p - kPrefixes) + 1;
  return -1;
}

}  // namespace

Result<uint64_t> parse_byte_size(std::string_view text) {
  const std::string quoted = "'" + std::string(text) + "'";
  if (text.empty()) return Error{"empty size"};
  size_t i = 0;
  while (i < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[i])) != 0 || text[i] == '.')) {
    ++i;
  }
  const std::string number(text.substr(0, i));
  const std::string unit(text.substr(i));
  if (number.empty() || number == "." || number.find('.') != number.rfind('.')) {
    return Error{"size " + quoted + " does not start with a number"};
  }
  const int power = unit_power(unit);
  if (power < 0) {
    return Error{"size " + quoted + " has an unknown unit '" + unit +
                 "' (use B, K, M, G, T, P, optionally with B or iB, e.g. 16G)"};
  }
  const double value = std::strtod(number.c_str(), nullptr);
  const double bytes = value * std::pow(1024.0, power);
  if (!std::isfinite(bytes) || bytes >= 9223372036854775807.0) {
    return Error{"size " + quoted + " is too large"};
  }
  return static_cast<uint64_t>(std::llround(bytes));  // < 2^63, fits
}

std::string format_byte_size(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  }
  return buf;
}

}  // namespace egpu::config
