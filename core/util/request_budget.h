// RequestBudget: how many control requests each user is served per second,
// over every socket of the agent's that users reach (the public one and
// their own). Connections are already bounded per user; without this, one
// user's 128 of them could keep the agent's one thread busy with requests
// (a status of hundreds of instances costs milliseconds), and root's
// creates, other users' attaches and every GPU's slice ticks would wait
// behind them. A token bucket per user: `burst` requests at once (every
// process of a many-task step attaching together), refilled at
// `per_second`. A request over budget is not refused: its connection is
// read again once the user has a token. Pure: the caller passes the time.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace egpu {

class RequestBudget {
 public:
  RequestBudget(double burst, double per_second) : burst_(burst), rate_(per_second) {}

  // Takes one request of `uid`'s at `now_ns` (monotonic); false when it has
  // none left, nothing taken.
  [[nodiscard]] bool take(uid_t uid, int64_t now_ns);
  // When `uid` has a request to spend again: `now_ns` if it has one now.
  int64_t ready_at(uid_t uid, int64_t now_ns) const;
  // Users whose budget is not full (a full one has no entry).
  size_t tracked() const { return buckets_.size(); }

 private:
  struct Bucket {
    double tokens;
    int64_t at_ns;
  };
  double tokens_at(const Bucket& b, int64_t now_ns) const;
  void forget_full(int64_t now_ns);

  double burst_;
  double rate_;
  std::unordered_map<uid_t, Bucket> buckets_;
};

}  // namespace egpu
