// GangGrants: whether a gang holds its next window, decided once for all of
// the gang's members on this node.
//
// A member that is ahead of its share (its collectives spun past a window's
// end into its co-tenants' time) skips windows until FAA has given that
// time back (arbiter_policy_gang.cpp). Decided on each GPU alone, from that
// GPU's deviation, one rank skips while its peer holds: the peer's
// collective then spins through its whole window waiting, is charged for
// it, gets ahead and skips the next one, and the ranks fall out of step.
// That kept the limit loose (5% of the GPU), and with it the co-tenants'
// loss when a busy host delays the ranks' launches. Decided once per window
// from the furthest-ahead member, the ranks skip together, so the limit can
// be tight. A gang spanning nodes decides on each node: the nodes can still
// disagree, so it keeps the looser limit and decides afresh at every look.
// Pure: the agent shares one instance between its GPUs' policies.
#ifndef EGPU_CORE_FAA_GANG_GRANTS_H
#define EGPU_CORE_FAA_GANG_GRANTS_H

#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "core/faa/types.h"

namespace egpu::faa {

// How far ahead of its share (FAA's decayed deviation, a fraction of the
// GPU) a gang may be and still hold its window: a gang whose members are
// all on this node, and one that spans nodes.
inline constexpr double kGangAheadLimit = 0.02;
inline constexpr double kGangAheadLimitAcrossNodes = 0.05;

class GangGrants {
 public:
  // A member is its GPU and its id in that GPU's policy (ids repeat across
  // GPUs: they are slots of each GPU's page).
  using Member = std::pair<uint32_t, InstanceId>;

  // The member's latest deviation, while it wants its GPU. `gang` names the
  // gang on this node (GangWindow::gang).
  void note(uint64_t gang, Member member, double ahead);
  // It no longer wants its GPU: its deviation no longer counts (the
  // decision for the current window stands).
  void quiet(uint64_t gang, Member member);
  // It left the gang or its GPU; the gang is forgotten with its last member.
  void leave(uint64_t gang, Member member);

  // Whether the gang holds its window that starts at `start`. On one node:
  // held when no member is more than kGangAheadLimit ahead at the first
  // call for that start, and until one is, for the rest of the window;
  // every GPU's look gets the same answer. Across nodes: held at each call
  // when no member here is more than kGangAheadLimitAcrossNodes ahead.
  // A window ended early ends on the other GPUs at their next look, not at
  // once: a collective already running on this GPU waits for its peers
  // there, and stopping them would make it spin longer (in simulated time,
  // a co-tenant's worst window went from 2.0 to 4.1 pp below with the
  // other GPUs looked at at once).
  bool holds(uint64_t gang, Nanos start, bool across_nodes);
  std::size_t gangs() const { return gangs_.size(); }

 private:
  struct Gang {
    std::set<Member> members;
    std::map<Member, double> ahead;  // of those that want their GPU
    bool decided = false;
    Nanos start = 0;  // the window the decision is for
    bool held = false;
  };
  std::map<uint64_t, Gang> gangs_;
};

}  // namespace egpu::faa

#endif  // EGPU_CORE_FAA_GANG_GRANTS_H
