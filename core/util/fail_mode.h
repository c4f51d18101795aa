// FailMode: what a shim does while it has no agent (absent, stopped, or it
// refused the attach), the one type for egpu.conf (FailMode=), EGPU_FAIL_MODE,
// the GPU page and the shim.
//
// The numbers are a contract: GpuPage::fail_mode carries them (a page
// outlives an agent restart). Never renumber. Header-only, so the SPANK
// plugin needs no extra library for it.
#pragma once

#include <cstdint>
#include <optional>

namespace egpu {

enum class FailMode : uint32_t {
  kOpen = 0,    // run unthrottled until an agent is back
  kClosed = 1,  // an attached process holds its last share; an unattached one is refused
};

// The number in the GPU page.
constexpr uint32_t fail_mode_value(FailMode mode) {
  return static_cast<uint32_t>(mode);
}

// A number read from a page: anything but closed reads as open, the mode
// that never stops a job (the page is the agent's alone, so this is damage).
constexpr FailMode fail_mode_from_value(uint32_t value) {
  return value == fail_mode_value(FailMode::kClosed) ? FailMode::kClosed : FailMode::kOpen;
}

// "open" or "closed", as egpu.conf and EGPU_FAIL_MODE spell them.
constexpr const char* to_string(FailMode mode) {
  return mode == FailMode::kClosed ? "closed" : "open";
}

}  // namespace egpu
