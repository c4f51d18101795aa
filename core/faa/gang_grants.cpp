#include "core/faa/gang_grants.h"

#include <algorithm>

namespace egpu::faa {

void GangGrants::note(uint64_t gang, Member member, double ahead) {
  Gang& g = gangs_[gang];
  g.members.insert(member);
  g.ahead[member] = ahead;
}

void GangGrants::quiet(uint64_t gang, Member member) {
  const auto it = gangs_.find(gang);
  if (it != gangs_.end()) it->second.ahead.erase(member);
}

void GangGrants::leave(uint64_t gang, Member member) {
  const auto it = gangs_.find(gang);
  if (it == gangs_.end()) return;
  it->second.members.erase(member);
  it->second.ahead.erase(member);
  if (it->second.members.empty()) gangs_.erase(it);
}

bool GangGrants::holds(uint64_t gang, Nanos start, bool across_nodes) {
  Gang& g = gangs_[gang];
  // Only being ahead counts, never being behind: a job lowers its own
  // reports at will, so "behind" is a claim (see arbiter_policy_gang.cpp).
  const double limit = across_nodes ? kGangAheadLimitAcrossNodes : kGangAheadLimit;
  const bool any_ahead =
      std::any_of(g.ahead.begin(), g.ahead.end(), [&](const auto& m) { return m.second > limit; });
  if (across_nodes) {
    // The other nodes decide on their own: a decision kept for the window
    // would leave their ranks spinning through the rest of it. Looked at
    // afresh each time, a node whose ranks crossed the limit for a moment
    // gives the window back at once.
    g.decided = false;
    return !any_ahead;
  }
  if (!g.decided || g.start != start) {
    g.decided = true;
    g.start = start;
    g.held = !any_ahead;
  } else if (g.held && any_ahead) {
    // A member that gets too far ahead in the window (a collective spinning
    // for a late peer) ends it for all of them, for the rest of it; one that
    // catches up, or that stops wanting and comes back, does not reopen it.
    g.held = false;
  }
  return g.held;
}

}  // namespace egpu::faa
