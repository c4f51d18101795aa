// libFuzzer target: the agent's request parser must reject or accept any
// bytes without crashing, and what it accepts must re-encode to the same bytes.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "core/protocol/codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  auto decoded = egpu::protocol::decode_request(bytes);
  if (decoded.ok()) {
    auto again = egpu::protocol::encode_request(decoded->request, decoded->request_id);
    if (again.size() != size || std::memcmp(again.data(), data, size) != 0) std::abort();
  }
  (void)egpu::protocol::peek_request_id(bytes);
  return 0;
}
