// libFuzzer target: the latency control's memory file (core/slo). A memory
// that decodes encodes to text that decodes to the same memory, and a
// controller given it moves no more share than its lenders have: a latency-
// critical instance ends within [its units, 100], a lender at or above its
// floor.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/slo/slo_memory_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace egpu::slo;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto memory = decode_slo_memory(text);
  if (!memory) {
    if (memory.error().empty()) std::abort();
    return 0;
  }
  auto again = decode_slo_memory(encode_slo_memory(*memory));
  if (!again || !(*again == *memory)) std::abort();

  SloController controller;
  std::vector<SloInput> inputs;
  for (const auto& [id, m] : memory->instances) {
    controller.restore(id, m);
    SloInput in;
    in.id = id;
    in.role = m.objective ? SloRole::kLatencyCritical : SloRole::kGuaranteed;
    in.objective = m.objective;
    in.units = 1 + static_cast<uint32_t>(id % 40);
    inputs.push_back(in);
  }
  SloInput lender;
  lender.id = 0;
  lender.role = SloRole::kLend;
  lender.units = 30;
  inputs.push_back(lender);
  for (int period = 0; period < 3; ++period) {
    for (const SloState& s : controller.step(inputs, 100'000'000)) {
      if (s.effective_units > 100) std::abort();
      if (s.role == SloRole::kLend && s.effective_units < controller.params().lend_floor_units)
        std::abort();
      if (s.role == SloRole::kLatencyCritical && s.effective_units < s.units) std::abort();
    }
  }
  return 0;
}
