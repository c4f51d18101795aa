#include "core/model/unmanaged_processes.h"

#include <algorithm>

namespace egpu::model {

bool attached_on(const GpuProcessSighting& s, uint32_t gpu, const AttachedProcesses& attached) {
  const auto attached_here = [&](int32_t pid) {
    const auto it = attached.find(pid);
    return it != attached.end() && it->second.contains(gpu);
  };
  return attached_here(s.pid) || std::any_of(s.ancestors.begin(), s.ancestors.end(), attached_here);
}

bool managed_on(const GpuProcessSighting& s, uint32_t gpu, const AttachedProcesses& attached) {
  return s.maps_shim && attached_on(s, gpu, attached);
}

bool managed_everywhere(const GpuProcessSighting& s, const AttachedProcesses& attached) {
  return std::all_of(s.gpus.begin(), s.gpus.end(),
                     [&](uint32_t gpu) { return managed_on(s, gpu, attached); });
}

bool managed_now(const UnmanagedProcess& p, const AttachedProcesses& attached) {
  const GpuProcessSighting last{p.pid,       p.start_time, p.uid,        {p.gpu},
                                p.ancestors, p.maps_shim,  p.process_uid};
  return managed_on(last, p.gpu, attached);
}

std::vector<UnmanagedProcess> UnmanagedProcessWatch::observe(
    int64_t now, const std::vector<GpuProcessSighting>& sightings,
    const std::vector<std::set<uint32_t>>& owners, const AttachedProcesses& attached,
    std::optional<int32_t> stopped_at) {
  ++scans_;
  std::map<Key, UnmanagedProcess> next;
  std::set<std::pair<uint32_t, uint32_t>> users_seen;
  for (const GpuProcessSighting& s : sightings) {
    if (s.uid == 0 || s.pid <= 0) continue;
    for (const uint32_t gpu : s.gpus) {
      if (gpu >= owners.size() || !owners[gpu].contains(s.uid)) continue;
      if (managed_on(s, gpu, attached)) continue;
      const Key key{s.pid, s.start_time, gpu};
      if (next.contains(key)) continue;  // a GPU listed twice
      UnmanagedProcess p;
      if (const auto it = seen_.find(key); it != seen_.end()) {
        p = it->second;
      } else {
        p.pid = s.pid;
        p.start_time = s.start_time;
        p.uid = s.uid;
        p.gpu = gpu;
        p.first_seen_ns = now;
        p.maps_shim = s.maps_shim;
        p.process_uid = s.process_uid;
      }
      p.first = false;
      ++p.scans_seen;
      p.ancestors = s.ancestors;
      users_seen.insert({s.uid, gpu});
      next.emplace(key, p);
    }
  }
  // What a scan given up on did not reach stays as it was: unless it
  // attached meanwhile (an honest process seen once between its cuInit
  // and its attach, which another process's stuck maps kept the scan from
  // seeing again).
  if (stopped_at) {
    for (const auto& [key, p] : seen_) {
      if (key.pid <= *stopped_at || next.contains(key)) continue;
      if (p.gpu >= owners.size() || !owners[p.gpu].contains(p.uid)) continue;
      if (managed_now(p, attached)) continue;
      next.emplace(key, p);
      users_seen.insert({p.uid, p.gpu});
    }
  }
  // A user's streak on a GPU begins at a scan that sees one of its
  // processes unmanaged there, and ends after kStreakGapScans without.
  for (auto it = streaks_.begin(); it != streaks_.end();) {
    if (users_seen.contains(it->first)) {
      it->second.empty_scans = 0;
    } else if (++it->second.empty_scans >= kStreakGapScans) {
      it = streaks_.erase(it);
      continue;
    }
    ++it;
  }
  for (const auto& user : users_seen)
    streaks_.try_emplace(user, Streak{now, 0});
  std::vector<UnmanagedProcess> due;
  for (auto& [key, p] : next) {
    const int64_t since = streaks_.at({p.uid, p.gpu}).since_ns;
    // In a streak past the grace; with the shim, seen by two scans (an
    // honest process between cuInit and its attach is seen once).
    if (!p.due && (p.scans_seen >= 2 || !p.maps_shim) && now - since >= kGraceNs) {
      p.due = true;
      p.first = true;
      ++total_due_;
    }
    if (p.due) due.push_back(p);
    p.first = false;
  }
  seen_ = std::move(next);
  return due;
}

std::vector<UnmanagedProcess> UnmanagedProcessWatch::current() const {
  std::vector<UnmanagedProcess> out;
  out.reserve(seen_.size());
  for (const auto& [key, p] : seen_)
    out.push_back(p);
  return out;
}

}  // namespace egpu::model
