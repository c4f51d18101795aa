// Encoding and validating control messages. decode_* never trust the input:
// every length, type and field range is checked and a failure says what was wrong.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/protocol/messages.h"
#include "core/util/result.h"

namespace egpu::protocol {

struct DecodedRequest {
  uint32_t request_id;
  Request request;
};

std::vector<uint8_t> encode_request(const Request& request, uint32_t request_id);
Result<DecodedRequest> decode_request(std::span<const uint8_t> bytes);

// Best effort: the request id of a message that failed to decode, so the error
// reply can still be matched by the client (0 when even the header is short).
uint32_t peek_request_id(std::span<const uint8_t> bytes);

std::vector<uint8_t> encode_reply(const Reply& reply, uint32_t request_id);
Result<Reply> decode_reply(std::span<const uint8_t> bytes, uint32_t expected_request_id);

}  // namespace egpu::protocol
