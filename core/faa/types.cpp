#include "core/faa/types.h"

namespace egpu::faa {

std::string_view to_string(Mode mode) {
  switch (mode) {
    case Mode::kBurst:
      return "burst";
    case Mode::kCap:
      return "cap";
  }
  return "unknown";
}

}  // namespace egpu::faa
