// DisposalProcesses: where sockets that hold what users passed the agent
// are closed last (passed_descriptors.h says why). Each user has one
// process at a time, fed over a SEQPACKET pair, one socket per message;
// the agent closes its own copy once a socket is in flight to it. A close
// that blocks there holds that user's process only: once its feed is full,
// the user gets a successor, up to kMaxProcessesPerUser alive.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/util/unique_fd.h"

namespace egpu::agent {

class DisposalProcesses {
 public:
  static constexpr std::size_t kMaxProcessesPerUser = 16;

  // `close_feed` closes a feed the agent ends (a unix socket's last close,
  // which the caller keeps off the agent's thread).
  explicit DisposalProcesses(void (*close_feed)(UniqueFd),
                             std::size_t feed_bytes = kDefaultFeedBytes,
                             std::size_t max_per_user = kMaxProcessesPerUser)
      : close_feed_(close_feed), feed_bytes_(feed_bytes), max_per_user_(max_per_user) {}
  // A feed holds this many bytes of messages before its process is taken
  // for stuck: thousands of sockets, each pinning one of its user's
  // descriptors in flight.
  static constexpr std::size_t kDefaultFeedBytes = 8 << 20;
  DisposalProcesses(const DisposalProcesses&) = delete;
  DisposalProcesses& operator=(const DisposalProcesses&) = delete;
  ~DisposalProcesses();

  // Hands `fd` to `uid`'s process (`fd` is then closed here) at `now`
  // (monotonic ns); false, and `fd` left as it is, where none can take it
  // (all of `uid`'s are stuck, or no process can be started). Other users'
  // processes that have closed all they were sent and were handed nothing
  // for kIdleNs are ended meanwhile: not at once, or two users passing
  // descriptors in turn would have the agent start a process (a clone of
  // itself, on its thread) for every one.
  bool hand(UniqueFd& fd, uid_t uid, int64_t now);
  static constexpr int64_t kIdleNs = 10'000'000'000;
  // Processes started since this began.
  uint64_t started() const { return started_; }
  // Processes alive (not yet reaped).
  std::size_t alive();
  // Ends every feed: each process exits once it has closed what it holds.
  void retire_all();
  // Kills `uid`'s processes where all kMaxProcessesPerUser are stuck (their
  // feeds full), else none: an
  // exiting process's closes never linger, so a close that waits for a
  // lingering socket's peer ends, and once they are reaped the user gets new
  // ones. One stuck in a FUSE file's flush its daemon never answers may not
  // die. Returns how many it signalled.
  std::size_t end_stuck(uid_t uid);

 private:
  struct Process {
    pid_t pid = -1;
    UniqueFd feed;
    // Sockets given to close (each once the agent's copy was closed), and
    // those it answered it had closed.
    uint64_t given = 0;
    uint64_t answered = 0;
    int64_t last_given_ns = 0;
  };
  bool start(Process* p);
  // Whether `p` has closed all it was given (its answers read here).
  static bool idle(Process& p);
  void retire(std::map<uid_t, Process>::iterator it);
  void reap();
  std::size_t alive_of(uid_t uid) const;

  void (*close_feed_)(UniqueFd);
  const std::size_t feed_bytes_;
  const std::size_t max_per_user_;
  std::map<uid_t, Process> current_;
  std::vector<std::pair<pid_t, uid_t>> retired_;
  uint64_t started_ = 0;
};

}  // namespace egpu::agent
