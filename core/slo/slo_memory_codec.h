// SloMemory: what a GPU's latency control keeps across an agent restart (its
// loans and what its controller remembers of each instance), and its JSON
// form, which the agent keeps in a root-only file of its runtime directory.
// The file is only ever the agent's own, but it may be damaged or from
// another version: decoding checks every field and names what is wrong, and
// the controller brings a decoded memory's values into their ranges.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "core/slo/slo_controller.h"
#include "core/util/result.h"

namespace egpu::slo {

struct SloMemory {
  static constexpr int kVersion = 2;  // 2: the objective as its two integers
  std::map<uint64_t, int32_t> loans;  // units by instance id: + borrowed, - lent
  std::map<uint64_t, SloController::Memory> instances;
  bool operator==(const SloMemory&) const = default;
};

std::string encode_slo_memory(const SloMemory& memory);
// The error names the field at fault ("instance 12: used: ...").
Result<SloMemory> decode_slo_memory(std::string_view text);

}  // namespace egpu::slo
