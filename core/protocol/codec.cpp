#include "core/protocol/codec.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "core/slo/latency_objective.h"

namespace egpu::protocol {
namespace {

template <typename T>
void append(std::vector<uint8_t>& out, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* p = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T load(std::span<const uint8_t> bytes, size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

template <typename Payload>
constexpr MessageType type_of() {
  if constexpr (std::is_same_v<Payload, AttachRequest>) return MessageType::kAttach;
  if constexpr (std::is_same_v<Payload, CreateRequest>) return MessageType::kCreate;
  if constexpr (std::is_same_v<Payload, RemoveRequest>) return MessageType::kRemove;
  if constexpr (std::is_same_v<Payload, ResizeRequest>) return MessageType::kResize;
  if constexpr (std::is_same_v<Payload, StatusRequest>) return MessageType::kStatus;
  if constexpr (std::is_same_v<Payload, ShowRequest>) return MessageType::kShow;
  if constexpr (std::is_same_v<Payload, ObjectiveRequest>) return MessageType::kObjective;
  if constexpr (std::is_same_v<Payload, UsageRequest>) return MessageType::kUsage;
}

std::string num(uint64_t v) {
  return std::to_string(v);
}

Status check_mode(uint32_t mode, bool allow_unchanged) {
  if (mode_from_value(mode).has_value()) return {};
  if (allow_unchanged && mode == kModeUnchanged) return {};
  return Error{"mode " + num(mode) + " is not burst (" + num(mode_value(Mode::kBurst)) +
               "), cap (" + num(mode_value(Mode::kCap)) + ") or lend (" +
               num(mode_value(Mode::kLend)) + ")"};
}

Status validate(const AttachRequest& r) {
  if (r.job_id == 0) return Error{"job id 0"};
  if (r.gpu_index >= kMaxGpus) return Error{"gpu index " + num(r.gpu_index) + " out of range"};
  return {};
}

Status validate(const CreateRequest& r) {
  if (r.job_id == 0) return Error{"job id 0"};
  if (r.gpu_index >= kMaxGpus) return Error{"gpu index " + num(r.gpu_index) + " out of range"};
  if (r.units < 1 || r.units > kUnitsPerGpu) {
    return Error{"units " + num(r.units) + " not in 1.." + num(kUnitsPerGpu)};
  }
  if (r.job_units < r.units || r.job_units > kUnitsPerGpu) {
    return Error{"job units " + num(r.job_units) + " not in " + num(r.units) + ".." +
                 num(kUnitsPerGpu)};
  }
  if (r.mem_quota > (uint64_t{1} << 50))
    return Error{"memory quota " + num(r.mem_quota) + " too large"};
  if (Status s = check_mode(r.mode, false); !s) return s;
  if ((r.flags & ~(kCreateUmbrella | kCreateEndsWithCaller | kCreateSpansNodes)) != 0) {
    return Error{"unknown create flags " + num(r.flags)};
  }
  return {};
}

Status validate(const RemoveRequest& r) {
  if (r.job_id == 0) return Error{"job id 0"};
  if (r.reserved != 0) return Error{"reserved field not zero"};
  return {};
}

Status validate(const UsageRequest& r) {
  if (r.job_id == 0) return Error{"job id 0"};
  if (r.reserved != 0) return Error{"reserved field not zero"};
  return {};
}

Status validate(const ResizeRequest& r) {
  if (r.instance_id == 0) return Error{"instance id 0"};
  if (r.units > kUnitsPerGpu)
    return Error{"units " + num(r.units) + " not in 1.." + num(kUnitsPerGpu)};
  if (Status s = check_mode(r.mode, true); !s) return s;
  if (r.units == 0 && r.mode == kModeUnchanged) return Error{"resize changes nothing"};
  if ((r.flags & ~kResizeForce) != 0 || r.reserved != 0) return Error{"unknown resize flags"};
  return {};
}

Status validate(const StatusRequest& r) {
  if (r.flags != 0 || r.reserved != 0) return Error{"unknown status flags"};
  return {};
}

Status validate(const ShowRequest& r) {
  if (r.instance_id == 0) return Error{"instance id 0"};
  return {};
}

Status validate(const ObjectiveRequest& r) {
  if (r.instance_id == 0) return Error{"instance id 0"};
  if (r.reserved != 0) return Error{"reserved field is not 0"};
  if (r.percentile_milli == 0 && r.target_ns == 0) return {};  // off
  if (r.percentile_milli == 0 || r.percentile_milli >= 100'000) {
    return Error{"percentile " + num(r.percentile_milli) +
                 " not in (0, 100000) thousandths of a percent"};
  }
  if (r.target_ns < slo::kMinTargetNs || r.target_ns > slo::kMaxTargetNs) {
    return Error{"latency target " + std::to_string(r.target_ns) + " ns not in [1 ms, 600 s]"};
  }
  return {};
}

template <typename Payload>
Result<DecodedRequest> decode_payload(std::span<const uint8_t> bytes, const Header& h) {
  const size_t want = sizeof(Header) + sizeof(Payload);
  if (bytes.size() != want) {
    return Error{std::string(to_string(type_of<Payload>())) + " message is " + num(bytes.size()) +
                 " bytes, expected " + num(want)};
  }
  auto payload = load<Payload>(bytes, sizeof(Header));
  if (Status s = validate(payload); !s) {
    return Error{std::string(to_string(type_of<Payload>())) + ": " + s.error()};
  }
  return DecodedRequest{h.request_id, Request{payload}};
}

Result<Header> decode_header(std::span<const uint8_t> bytes, size_t max_size) {
  if (bytes.size() < sizeof(Header)) {
    return Error{"message of " + num(bytes.size()) + " bytes is shorter than the " +
                 num(sizeof(Header)) + "-byte header"};
  }
  if (bytes.size() > max_size) {
    return Error{"message of " + num(bytes.size()) + " bytes exceeds the limit of " +
                 num(max_size)};
  }
  auto h = load<Header>(bytes, 0);
  if (h.magic != kMagic) return Error{"bad magic (not an egpu message)"};
  if (h.version != kVersion) {
    return Error{"protocol version " + num(h.version) + ", this side speaks " + num(kVersion)};
  }
  if (h.length != bytes.size()) {
    return Error{"header says " + num(h.length) + " bytes, received " + num(bytes.size())};
  }
  return h;
}

}  // namespace

const char* to_string(MessageType type) {
  switch (type) {
    case MessageType::kAttach:
      return "attach";
    case MessageType::kCreate:
      return "create";
    case MessageType::kRemove:
      return "remove";
    case MessageType::kResize:
      return "resize";
    case MessageType::kStatus:
      return "status";
    case MessageType::kShow:
      return "show";
    case MessageType::kObjective:
      return "objective";
    case MessageType::kUsage:
      return "usage";
    case MessageType::kReply:
      return "reply";
  }
  return "unknown";
}

const char* to_string(ReplyStatus status) {
  switch (status) {
    case ReplyStatus::kOk:
      return "ok";
    case ReplyStatus::kBadRequest:
      return "bad request";
    case ReplyStatus::kDenied:
      return "permission denied";
    case ReplyStatus::kNotFound:
      return "not found";
    case ReplyStatus::kOverAllocation:
      return "beyond the job's allocation";
    case ReplyStatus::kExists:
      return "already exists";
    case ReplyStatus::kFull:
      return "no free slot";
    case ReplyStatus::kVersionMismatch:
      return "protocol version mismatch";
    case ReplyStatus::kInternal:
      return "internal error";
  }
  return "unknown status";
}

std::vector<uint8_t> encode_request(const Request& request, uint32_t request_id) {
  std::vector<uint8_t> out;
  std::visit(
      [&](const auto& payload) {
        using P = std::decay_t<decltype(payload)>;
        Header h{kMagic, kVersion, static_cast<uint16_t>(type_of<P>()),
                 static_cast<uint32_t>(sizeof(Header) + sizeof(P)), request_id};
        append(out, h);
        append(out, payload);
      },
      request);
  return out;
}

uint32_t peek_request_id(std::span<const uint8_t> bytes) {
  if (bytes.size() < sizeof(Header)) return 0;
  return load<Header>(bytes, 0).request_id;
}

Result<DecodedRequest> decode_request(std::span<const uint8_t> bytes) {
  auto h = decode_header(bytes, kMaxRequestSize);
  if (!h) return Error{h.error()};
  switch (static_cast<MessageType>(h->type)) {
    case MessageType::kAttach:
      return decode_payload<AttachRequest>(bytes, *h);
    case MessageType::kCreate:
      return decode_payload<CreateRequest>(bytes, *h);
    case MessageType::kRemove:
      return decode_payload<RemoveRequest>(bytes, *h);
    case MessageType::kResize:
      return decode_payload<ResizeRequest>(bytes, *h);
    case MessageType::kStatus:
      return decode_payload<StatusRequest>(bytes, *h);
    case MessageType::kShow:
      return decode_payload<ShowRequest>(bytes, *h);
    case MessageType::kObjective:
      return decode_payload<ObjectiveRequest>(bytes, *h);
    case MessageType::kUsage:
      return decode_payload<UsageRequest>(bytes, *h);
    case MessageType::kReply:
      break;
  }
  return Error{"unknown message type " + num(h->type)};
}

std::vector<uint8_t> encode_reply(const Reply& reply, uint32_t request_id) {
  const size_t room = kMaxReplySize - sizeof(Header) - sizeof(ReplyFixed);
  const size_t text_len = std::min(reply.text.size(), room);
  std::vector<uint8_t> out;
  out.reserve(sizeof(Header) + sizeof(ReplyFixed) + text_len);
  Header h{kMagic, kVersion, static_cast<uint16_t>(MessageType::kReply),
           static_cast<uint32_t>(sizeof(Header) + sizeof(ReplyFixed) + text_len), request_id};
  append(out, h);
  ReplyFixed f{static_cast<int32_t>(reply.status), reply.flags, reply.instance_id, reply.gpu_slot,
               reply.proc_slot};
  append(out, f);
  out.insert(out.end(), reply.text.begin(), reply.text.begin() + static_cast<long>(text_len));
  return out;
}

Result<Reply> decode_reply(std::span<const uint8_t> bytes, uint32_t expected_request_id) {
  auto h = decode_header(bytes, kMaxReplySize);
  if (!h) return Error{h.error()};
  if (h->type != static_cast<uint16_t>(MessageType::kReply)) {
    return Error{"expected a reply, got message type " + num(h->type)};
  }
  if (bytes.size() < sizeof(Header) + sizeof(ReplyFixed)) return Error{"truncated reply"};
  if (h->request_id != expected_request_id) {
    return Error{"reply to request " + num(h->request_id) + ", expected " +
                 num(expected_request_id)};
  }
  auto f = load<ReplyFixed>(bytes, sizeof(Header));
  if (f.status < 0 || f.status > static_cast<int32_t>(ReplyStatus::kInternal)) {
    return Error{"unknown reply status " + std::to_string(f.status)};
  }
  Reply r;
  r.status = static_cast<ReplyStatus>(f.status);
  r.flags = f.flags;
  r.instance_id = f.instance_id;
  r.gpu_slot = f.gpu_slot;
  r.proc_slot = f.proc_slot;
  const size_t off = sizeof(Header) + sizeof(ReplyFixed);
  r.text.assign(reinterpret_cast<const char*>(bytes.data() + off), bytes.size() - off);
  return r;
}

}  // namespace egpu::protocol
