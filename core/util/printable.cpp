#include "core/util/printable.h"

#include <utility>

namespace egpu {
namespace {

bool continuation(unsigned char b) {
  return b >= 0x80 && b <= 0xbf;
}

// The length of the valid UTF-8 sequence at `i` (0: none starts there):
// no overlong forms, no surrogates, nothing past U+10FFFF.
size_t utf8_length(std::string_view text, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = at(0);
  size_t n = 0;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (i + n > text.size() || at(1) < low || at(1) > high) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (!continuation(at(k))) return 0;
  }
  return n;
}

}  // namespace

std::string printable(std::string_view text, Lines lines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      const bool kept_space = lines == Lines::kKept && (byte == '\n' || byte == '\t');
      out.push_back((byte < 0x20 && !kept_space) || byte == 0x7f ? '?' : text[i]);
      ++i;
      continue;
    }
    const size_t n = utf8_length(text, i);
    const bool c1 = n == 2 && byte == 0xc2 && static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    if (n == 0 || c1) {
      out.push_back('?');
      i += n == 0 ? 1 : n;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

void make_printable(nlohmann::json& value) {
  if (value.is_string()) {
    value = printable(value.get_ref<const std::string&>(), Lines::kOne);
  } else if (value.is_array()) {
    for (auto& item : value)
      make_printable(item);
  } else if (value.is_object()) {
    nlohmann::json cleaned = nlohmann::json::object();
    for (auto& [key, item] : value.items()) {
      make_printable(item);
      cleaned[printable(key, Lines::kOne)] = std::move(item);
    }
    value = std::move(cleaned);
  }
}

}  // namespace egpu
