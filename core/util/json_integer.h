// A checked integer from a JSON value (nlohmann): files and replies the
// agent reads back are not trusted to hold numbers of the right kind or size.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>

namespace egpu {

// An integer of type T from `j`, or nullopt when it is not an integer (a
// float, a string, a bool) or is out of T's range. nlohmann keeps integers
// that fit int64_t as signed and larger ones as unsigned; both are checked
// before converting, so no value wraps into range.
template <typename T>
std::optional<T> json_integer(const nlohmann::json& j) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  if (!j.is_number_integer()) return std::nullopt;
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<T>::max())) return std::nullopt;
    return static_cast<T>(v);
  }
  const int64_t v = j.get<int64_t>();
  if constexpr (std::is_unsigned_v<T>) {
    if (v < 0 || static_cast<uint64_t>(v) > std::numeric_limits<T>::max()) return std::nullopt;
  } else {
    if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return std::nullopt;
  }
  return static_cast<T>(v);
}

}  // namespace egpu
