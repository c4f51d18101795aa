// libFuzzer target: the multi-node gangs' offsets file (core/model). What
// decodes holds offsets within its period and encodes to text that decodes
// to the same offsets; what does not names a reason.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/model/gang_offsets_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace egpu::model;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto offsets = decode_gang_offsets(text);
  if (!offsets) {
    if (offsets.error().empty()) std::abort();
    return 0;
  }
  if (offsets->period <= 0 || offsets->offsets.size() > GangOffsets::kMaxGangs) std::abort();
  for (const auto& [key, offset] : offsets->offsets) {
    if (key.first == 0 || offset < 0 || offset >= offsets->period) std::abort();
  }
  auto again = decode_gang_offsets(encode_gang_offsets(*offsets));
  if (!again || !(*again == *offsets)) std::abort();
  return 0;
}
