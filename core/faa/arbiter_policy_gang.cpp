// ArbiterPolicy's gang windows (gang_window.h): which instances may ask at
// a given time, and how deep they may queue near a window's boundaries. The
// SliceScheduler then decides among those who ask as usual, so co-tenants
// share what the windows leave by FAA, with their usual bounds.
#include <algorithm>
#include <string>

#include "core/faa/arbiter_policy.h"

namespace egpu::faa {

namespace {

// Within the in-flight bound of a boundary the policy looks again at least
// this often, halving the time left at each look (each look tightens the
// bound the shims enforce at launch).
constexpr Nanos kMinBoundaryLook = 100 * kMicrosecond;

// A window is a promise of time, not a way around FAA, either way. A gang
// one of whose members is too far ahead of its share (FAA's decayed
// deviation) does not get its window (GangGrants decides, for all its
// members at once): a rank that keeps launching a long kernel just before
// its window ends, or whose collective spins past it waiting for a late
// peer, takes the co-tenants' time after it; it is charged for it, and
// skipped windows give that time back. A co-tenant this far ahead (its long
// kernels ran into the rank's windows) does not keep the rank out of the
// time between windows: the rank asks there too, and FAA decides. Only
// being ahead counts, never being behind: a job lowers its own reports at
// will (the held-time floor bounds what that buys), so "behind" is a claim.
constexpr double kCotenantAheadLimit = 0.05;

}  // namespace

Status ArbiterPolicy::set_gang_window(InstanceId id, std::optional<GangWindow> window) {
  auto it = members_.find(id);
  if (it == members_.end()) return Error{"gang window: no instance " + std::to_string(id)};
  if (window) {
    if (Status s = validate(*window); !s.ok()) return s;
  }
  if (it->second.gang && (!window || window->gang != it->second.gang->gang)) {
    grants_->leave(it->second.gang->gang, {gpu_, id});
  }
  it->second.gang = window;
  return {};
}

void ArbiterPolicy::apply_gang_windows(Nanos now) {
  // Boundaries are kept by the in-flight bound, which the shims enforce at
  // every launch: within the bound of a window's start, whoever holds the
  // GPU may queue only what runs until the start, so the member begins on
  // an empty device at the same time on every GPU of its gang (a handover
  // drain would start it late by this GPU's tail, a different delay on
  // each GPU); within the bound of its end, the member may queue only what
  // runs until the end, so the time after it is the co-tenants'.
  std::optional<InstanceId> open;
  bool others_want = false;
  gang_bound_ns_ = kNever;
  for (const auto& [id, m] : members_) {
    others_want = others_want || (m.wants && window_of(m, now) == nullptr &&
                                  ahead(id, now) <= kCotenantAheadLimit);
  }
  for (const auto& [id, m] : members_) {
    const GangWindow* gang = window_of(m, now);
    if (gang == nullptr) continue;
    if (!m.wants) {
      grants_->quiet(gang->gang, {gpu_, id});
      continue;
    }
    grants_->note(gang->gang, {gpu_, id}, ahead(id, now));
  }
  for (const auto& [id, m] : members_) {
    const GangWindow* gang = window_of(m, now);
    if (gang == nullptr || !m.wants) continue;
    const WindowPhase w = window_at(*gang, now);
    if (w.open && grants_->holds(gang->gang, w.start, gang->across_nodes)) {
      open = open.value_or(id);  // placement keeps windows on one GPU apart
    }
    gang_bound_ns_ = std::min(gang_bound_ns_, (w.open ? w.end : w.start) - now);
  }
  for (auto& [id, m] : members_) {
    bool asking = m.wants;
    if (open) {
      asking = asking && id == *open;
    } else if (window_of(m, now) != nullptr) {
      asking = asking && !others_want;  // outside its window: what others leave
    }
    if (asking != m.asking) {
      (void)scheduler_.set_asking(id, asking, now);
      m.asking = asking;
    }
  }
}

const GangWindow* ArbiterPolicy::window_of(const Member& m, Nanos /*now*/) {
  return m.gang ? &*m.gang : nullptr;
}

bool ArbiterPolicy::in_gang_window(InstanceId id, Nanos now) const {
  const auto it = members_.find(id);
  if (it == members_.end()) return false;
  const GangWindow* w = window_of(it->second, now);
  return w != nullptr && window_at(*w, now).open;
}

double ArbiterPolicy::ahead(InstanceId id, Nanos now) const {
  const auto st = scheduler_.stats(id, now);
  return st.ok() ? st->deviation : 0.0;
}

Nanos ArbiterPolicy::next_gang_boundary(Nanos now) const {
  const Nanos lead = inflight_bound_ns_;
  Nanos next = kNever;
  for (const auto& [id, m] : members_) {
    const GangWindow* gang = window_of(m, now);
    if (gang == nullptr || !m.wants) continue;
    const WindowPhase w = window_at(*gang, now);
    const Nanos boundary = w.open ? w.end : w.start;
    const Nanos left = boundary - now;
    const Nanos look = left > lead ? boundary - lead
                                   : std::min(boundary, now + std::max(kMinBoundaryLook, left / 2));
    next = std::min(next, look);
  }
  return std::max(next, now + 1);
}

}  // namespace egpu::faa
