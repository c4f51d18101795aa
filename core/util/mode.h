// Mode: how an instance may use GPU time beyond its share, the one type for
// egpu.conf (DefaultMode=), --egpu-mode, egpuctl, the control protocol, the
// GPU page and the FAA scheduler.
//
// The numbers are a contract: CreateRequest.mode and ResizeRequest.mode carry
// them on the wire, SlotRecord.mode in the GPU record page (which outlives an agent
// restart). Never renumber; a new mode takes a new number. Header-only, so the
// SPANK and Slurm plugins need no extra library for it.
#pragma once

#include <cctype>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/util/result.h"

namespace egpu {

enum class Mode : uint32_t {
  kBurst = 0,  // work-conserving: may use capacity nobody else asks for
  kCap = 1,    // never above its target share
  // Burst, and while a latency-critical neighbour on the GPU is at risk of
  // missing its objective, part of its share may be borrowed and is given
  // back when it is not (core/slo). Only its owner can choose it.
  kLend = 2,
};

// How FAA slices time for the mode: lending changes the share, not how it
// is used, so a lend instance is sliced as burst.
constexpr Mode time_slicing(Mode mode) {
  return mode == Mode::kCap ? Mode::kCap : Mode::kBurst;
}

// The number on the wire and in the GPU page.
constexpr uint32_t mode_value(Mode mode) {
  return static_cast<uint32_t>(mode);
}

// A number read from the wire or a page, which may come from a hostile or
// older peer: nullopt for anything that is not a mode.
constexpr std::optional<Mode> mode_from_value(uint32_t value) {
  switch (value) {
    case mode_value(Mode::kBurst):
      return Mode::kBurst;
    case mode_value(Mode::kCap):
      return Mode::kCap;
    case mode_value(Mode::kLend):
      return Mode::kLend;
  }
  return std::nullopt;
}

// "burst", "cap" or "lend"; a C string, for log lines as much as for JSON.
constexpr const char* to_string(Mode mode) {
  switch (mode) {
    case Mode::kCap:
      return "cap";
    case Mode::kLend:
      return "lend";
    case Mode::kBurst:
      break;
  }
  return "burst";
}

// "burst", "cap" or "lend" in any case, as users write it in options.
// The error says what is accepted; callers prefix what they were reading.
inline Result<Mode> parse_mode(std::string_view text) {
  std::string lower(text);
  for (char& c : lower)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (Mode mode : {Mode::kBurst, Mode::kCap, Mode::kLend}) {
    if (lower == to_string(mode)) return mode;
  }
  return Error{"must be burst, cap or lend, got '" + std::string(text) + "'"};
}

}  // namespace egpu
