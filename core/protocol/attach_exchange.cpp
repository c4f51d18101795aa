#include "core/protocol/attach_exchange.h"

#include <utility>

namespace egpu::protocol {

CallResult<AttachReply> request_attach(const std::string& socket_path, const AttachRequest& request,
                                       int timeout_ms) {
  auto client = ControlClient::connect(socket_path, Deadline::after_ms(timeout_ms));
  if (!client) return client.call_error();
  auto got = client->call_with_fds(request);
  if (!got) return got.call_error();
  if (got->reply.status != ReplyStatus::kOk) {
    std::string text = std::string("the agent refused: ") + to_string(got->reply.status);
    if (!got->reply.text.empty()) text += " (" + got->reply.text + ")";
    return CallError{CallFailure::kRefused, std::move(text)};
  }
  if (got->fds.size() != kAttachReplyFds) {
    return CallError{CallFailure::kUnreachable,
                     "the agent's reply carried " + std::to_string(got->fds.size()) +
                         " descriptors, expected " + std::to_string(kAttachReplyFds)};
  }
  AttachReply out;
  out.reply = std::move(got->reply);
  out.gpu_page = std::move(got->fds[0]);
  out.instance_page = std::move(got->fds[1]);
  out.wake = std::move(got->fds[2]);
  return out;
}

}  // namespace egpu::protocol
