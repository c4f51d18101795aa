#include "shim/vmm_mappings.h"

namespace egpu::shim {

uint64_t VmmMappings::add_handle(uint64_t handle, int ordinal, uint64_t bytes, bool imported) {
  std::lock_guard lock(mu_);
  const uint64_t serial = next_serial_++;
  physical_[serial] = Physical{serial, ordinal, bytes, imported, 1, 0};
  handles_[handle] = serial;
  return serial;
}

std::optional<VmmMappings::Physical> VmmMappings::find_handle(uint64_t handle) const {
  std::lock_guard lock(mu_);
  const auto h = handles_.find(handle);
  if (h == handles_.end()) return std::nullopt;
  const auto p = physical_.find(h->second);
  if (p == physical_.end()) return std::nullopt;
  return p->second;
}

std::optional<VmmMappings::Physical> VmmMappings::find_mapped(uint64_t address) const {
  std::lock_guard lock(mu_);
  auto r = ranges_.upper_bound(address);
  if (r == ranges_.begin()) return std::nullopt;
  --r;
  if (address - r->first >= r->second.size) return std::nullopt;
  const auto p = physical_.find(r->second.serial);
  if (p == physical_.end()) return std::nullopt;
  return p->second;
}

uint64_t VmmMappings::add_mapping(uint64_t serial, uint64_t start, uint64_t size,
                                  uint64_t grow_to) {
  std::lock_guard lock(mu_);
  const auto p = physical_.find(serial);
  if (p == physical_.end()) return 0;
  ranges_[start] = Range{size, serial};
  ++p->second.mappings;
  if (!p->second.imported || grow_to <= p->second.bytes) return 0;
  const uint64_t growth = grow_to - p->second.bytes;
  p->second.bytes = grow_to;
  return growth;
}

bool VmmMappings::retain(uint64_t handle, uint64_t address) {
  std::lock_guard lock(mu_);
  auto r = ranges_.upper_bound(address);
  if (r == ranges_.begin()) return false;
  --r;
  if (address - r->first >= r->second.size) return false;
  const auto p = physical_.find(r->second.serial);
  if (p == physical_.end()) return false;
  ++p->second.refs;
  handles_[handle] = p->first;
  return true;
}

void VmmMappings::collect_if_dead(uint64_t serial, Pending* p) {
  const auto it = physical_.find(serial);
  if (it == physical_.end() || it->second.refs > 0 || it->second.mappings > 0) return;
  p->dead.push_back(it->second);
  physical_.erase(it);
}

VmmMappings::Pending VmmMappings::begin_release(uint64_t handle) {
  std::lock_guard lock(mu_);
  Pending p;
  p.handle = handle;
  const auto h = handles_.find(handle);
  if (h == handles_.end()) return p;
  const uint64_t serial = h->second;
  const auto it = physical_.find(serial);
  if (it == physical_.end()) return p;
  p.serial = serial;
  // Every retained reference returns the same handle value: the value stays
  // live until its last reference is released.
  if (--it->second.refs == 0) handles_.erase(h);
  collect_if_dead(serial, &p);
  return p;
}

VmmMappings::Pending VmmMappings::begin_unmap(uint64_t start, uint64_t size) {
  std::lock_guard lock(mu_);
  Pending p;
  auto first = ranges_.lower_bound(start);
  // A range past the address space (the driver refuses it) must not wrap
  // below `start`: erase(first, last) with last before first corrupts the map.
  const uint64_t end = size > UINT64_MAX - start ? UINT64_MAX : start + size;
  const auto last = ranges_.lower_bound(end);
  std::vector<uint64_t> touched;
  for (auto r = first; r != last; ++r) {
    p.ranges.emplace_back(r->first, r->second.serial);
    p.sizes.push_back(r->second.size);
    const auto it = physical_.find(r->second.serial);
    if (it != physical_.end() && it->second.mappings > 0) --it->second.mappings;
    touched.push_back(r->second.serial);
  }
  ranges_.erase(first, last);
  for (uint64_t serial : touched)
    collect_if_dead(serial, &p);
  return p;
}

void VmmMappings::undo(const Pending& p) {
  std::lock_guard lock(mu_);
  for (const Physical& d : p.dead)
    physical_[d.serial] = d;
  if (p.serial) {
    const auto it = physical_.find(*p.serial);
    if (it != physical_.end()) {
      ++it->second.refs;
      handles_[p.handle] = *p.serial;
    }
  }
  for (size_t i = 0; i < p.ranges.size(); ++i) {
    const auto [start, serial] = p.ranges[i];
    const auto it = physical_.find(serial);
    if (it == physical_.end()) continue;
    ranges_[start] = Range{p.sizes[i], serial};
    ++it->second.mappings;
  }
}

size_t VmmMappings::size() const {
  std::lock_guard lock(mu_);
  return physical_.size();
}

}  // namespace egpu::shim
