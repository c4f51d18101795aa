#include "core/model/unmanaged_processes.h"

namespace egpu::model {

std::vector<UnmanagedProcess> UnmanagedProcessWatch::observe(
    int64_t now, const std::vector<GpuProcessSighting>& sightings,
    const std::vector<std::set<uint32_t>>& owners) {
  std::map<Key, UnmanagedProcess> next;
  std::vector<UnmanagedProcess> became_due;
  for (const GpuProcessSighting& s : sightings) {
    if (s.uid == 0 || s.maps_shim || s.pid <= 0) continue;
    for (const uint32_t gpu : s.gpus) {
      if (gpu >= owners.size() || !owners[gpu].contains(s.uid)) continue;
      const Key key{s.pid, s.start_time, gpu};
      if (next.contains(key)) continue;  // a GPU listed twice
      UnmanagedProcess p{s.pid, s.start_time, s.uid, gpu, now, false};
      if (const auto it = seen_.find(key); it != seen_.end()) p = it->second;
      // Seen in an earlier scan (first_seen < now) and long enough ago.
      if (!p.due && p.first_seen_ns < now && now - p.first_seen_ns >= kGraceNs) {
        p.due = true;
        ++total_due_;
        became_due.push_back(p);
      }
      next.emplace(key, p);
    }
  }
  // What the scan did not see is gone (exited, or now managed): forgotten,
  // so a process that comes back starts its grace again.
  seen_ = std::move(next);
  return became_due;
}

std::vector<UnmanagedProcess> UnmanagedProcessWatch::current() const {
  std::vector<UnmanagedProcess> out;
  out.reserve(seen_.size());
  for (const auto& [key, p] : seen_)
    out.push_back(p);
  return out;
}

}  // namespace egpu::model
