// PerUidCount: how many of something bounded (connections to an agent
// endpoint) each user holds now. A user holding none has no entry, so the
// map does not grow with every uid that ever connected.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <unordered_map>

namespace egpu {

class PerUidCount {
 public:
  size_t held(uid_t uid) const {
    auto it = counts_.find(uid);
    return it == counts_.end() ? 0 : it->second;
  }
  // One more for `uid` if it holds fewer than `limit`; false (nothing
  // counted) when it holds its limit.
  [[nodiscard]] bool take(uid_t uid, size_t limit) {
    if (held(uid) >= limit) return false;
    ++counts_[uid];
    return true;
  }
  // One fewer for `uid` (nothing when it holds none).
  void give_back(uid_t uid) {
    auto it = counts_.find(uid);
    if (it != counts_.end() && --it->second == 0) counts_.erase(it);
  }
  // Users holding at least one.
  size_t users() const { return counts_.size(); }

 private:
  std::unordered_map<uid_t, size_t> counts_;
};

}  // namespace egpu
