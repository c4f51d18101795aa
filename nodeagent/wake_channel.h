// WakeChannel: how one instance's shims ask the agent to decide now (a shim
// that starts to wait sends one datagram). Each instance has its own channel,
// and the agent reads only its own end of it: a job user can change the flags
// of, flood, fill or shut down the end it was given, and that reaches no other
// user and never blocks the agent (its end is non-blocking, every receive
// says MSG_DONTWAIT, and one drain reads a bounded number of datagrams).
#pragma once

#include <sys/types.h>

#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::agent {

class WakeChannel {
 public:
  // How the agent's end keeps out descriptors a user sends on it
  // (passed_descriptors.h): refused by the kernel where it can, else each
  // datagram peeked first. kPeeked is what older kernels get.
  enum class Descriptors { kRefusedWhereTheKernelCan, kPeeked };
  // `owner`: the instance's user, whose disposal process takes the ends
  // where they hold descriptors it passed.
  static Result<WakeChannel> create(uid_t owner,
                                    Descriptors how = Descriptors::kRefusedWhereTheKernelCan);
  WakeChannel(WakeChannel&&) = default;
  WakeChannel& operator=(WakeChannel&&);
  // Closes both ends without taking in descriptors a user queued on them
  // (passed_descriptors.h).
  ~WakeChannel();

  // The agent's end: watch it for reading.
  int agent_fd() const { return agent_.get(); }
  // The end handed to the instance's processes at attach.
  int shim_fd() const { return shim_.get(); }

  enum class Drained { kNothing, kKicked, kClosed };
  // Reads what is queued, at most kMaxDatagramsPerDrain datagrams (a flood
  // is read over several turns of the event loop). kClosed: the user shut
  // the channel down, or sent descriptors on it; the agent stops watching
  // it.
  Drained drain();

  static constexpr int kMaxDatagramsPerDrain = 64;

 private:
  WakeChannel(UniqueFd agent, UniqueFd shim, uid_t owner, bool refused)
      : agent_(std::move(agent)), shim_(std::move(shim)), owner_(owner), refused_(refused) {}
  UniqueFd agent_;
  UniqueFd shim_;
  uid_t owner_;
  // Whether the kernel refuses descriptors sent to agent_ (SO_PASSRIGHTS).
  bool refused_;
};

}  // namespace egpu::agent
