#include "core/util/printable.h"

#include <utility>

namespace egpu {

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool c0 = byte < 0x20 && byte != '\n' && byte != '\t';
    const bool c1 = byte == 0xc2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    if (c1) ++i;  // both bytes of its encoding
    out.push_back(c0 || c1 || byte == 0x7f ? '?' : text[i]);
  }
  return out;
}

void make_printable(nlohmann::json& value) {
  if (value.is_string()) {
    value = printable(value.get_ref<const std::string&>());
  } else if (value.is_array()) {
    for (auto& item : value)
      make_printable(item);
  } else if (value.is_object()) {
    nlohmann::json cleaned = nlohmann::json::object();
    for (auto& [key, item] : value.items()) {
      make_printable(item);
      cleaned[printable(key)] = std::move(item);
    }
    value = std::move(cleaned);
  }
}

}  // namespace egpu
