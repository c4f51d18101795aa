// libFuzzer target: the reply parser used by egpuctl, SPANK and the shim.
#include <cstdint>
#include <span>

#include "core/protocol/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto r = egpu::protocol::decode_reply(bytes, egpu::protocol::peek_request_id(bytes));
  if (r.ok()) (void)egpu::protocol::encode_reply(*r, 1);
  return 0;
}
