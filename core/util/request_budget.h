// RequestBudget: how much of the agent's one thread each user's control
// requests may take, over every socket of the agent's that users reach (the
// public one and their own). Connections are already bounded per user;
// without this, one user's 128 of them could keep the thread busy with
// requests (a status of hundreds of instances costs milliseconds), and
// root's creates, other users' attaches and every GPU's slice ticks would
// wait behind them. A token bucket per user: `burst` tokens at once (every
// process of a many-task step attaching to every GPU), refilled at
// `per_second` (a TokenBucket per user). A request is served while its user has a token, and then
// charged what it cost (the caller's measure: its reply's size), which may
// leave the user in debt. A request that finds none is not refused: its
// connection is read again once the user has one. Pure: the caller passes
// the time.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>

#include "core/util/token_bucket.h"

namespace egpu {

class RequestBudget {
 public:
  RequestBudget(double burst, double per_second) : burst_(burst), rate_(per_second) {}

  // Whether `uid` may be served a request at `now_ns` (monotonic): it has a
  // token, or more.
  bool may_serve(uid_t uid, int64_t now_ns) const;
  // Takes what a request of `uid`'s cost (tokens, at least 1 each) at
  // `now_ns`: below zero is a debt the refill pays first.
  void charge(uid_t uid, double cost, int64_t now_ns);
  // When `uid` has a token again: `now_ns` if it has one now.
  int64_t ready_at(uid_t uid, int64_t now_ns) const;
  // Users whose budget is not full (a full one has no entry).
  size_t tracked() const { return buckets_.size(); }

 private:
  void forget_full(int64_t now_ns);

  double burst_;
  double rate_;
  std::unordered_map<uid_t, TokenBucket> buckets_;
};

}  // namespace egpu
