#include "simgpu_stats.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "model/config.h"
#include "model/device_identity.h"
#include "model/device_lock.h"
#include "model/layout.h"
#include "model/process_identity.h"
#include "model/segment.h"
#include "model/timeline.h"

namespace egpu::simgpu {
namespace {

bool device_matches(uint32_t device, int wanted) {
  return wanted < 0 || device == static_cast<uint32_t>(wanted);
}

void copy_device(const Segment& segment, uint32_t index, StatsSample* out) {
  const DeviceShared& dev = segment.device(index);
  DeviceSample d;
  d.index = index;
  d.name = segment.config().device_name;
  d.pci_bus_id = pci_bus_id_string(segment.config().pci_bus[index]);
  d.busy_ns = dev.timeline.busy_ns;
  d.memory_used_bytes = dev.memory.used_bytes;
  d.memory_total_bytes = dev.memory.total_bytes;
  for (uint32_t i = 0; i < dev.memory.high_water; ++i) {
    if (dev.memory.entries[i].kind != static_cast<uint32_t>(AllocationKind::kFree)) ++d.allocations;
  }
  out->devices.push_back(std::move(d));
  for (uint32_t s = 0; s < kMaxContexts; ++s) {
    const ContextSlot& c = dev.timeline.contexts[s];
    if (c.state == static_cast<uint32_t>(ContextState::kFree)) continue;
    ContextSample cs;
    cs.pid = c.owner.pid;
    cs.device = index;
    cs.slot = s;
    cs.generation = c.generation;
    cs.label.assign(c.label, strnlen(c.label, sizeof c.label));
    cs.busy_ns = c.busy_ns;
    cs.queued_ops = queued_ops(c);
    cs.alive = c.state == static_cast<uint32_t>(ContextState::kActive);
    cs.created_ns = c.created_ns;
    cs.retired_ns = c.retired_ns;
    out->contexts.push_back(std::move(cs));
  }
}

}  // namespace

uint64_t StatsSample::busy_ns_of_pid(int32_t pid, int device) const {
  uint64_t total = 0;
  for (const ContextSample& c : contexts) {
    if (c.pid == pid && device_matches(c.device, device)) total += c.busy_ns;
  }
  return total;
}

uint64_t StatsSample::busy_ns_of_label(const std::string& label, int device) const {
  uint64_t total = 0;
  for (const ContextSample& c : contexts) {
    if (c.label == label && device_matches(c.device, device)) total += c.busy_ns;
  }
  return total;
}

size_t StatsSample::alive_contexts(int device) const {
  size_t n = 0;
  for (const ContextSample& c : contexts) {
    if (c.alive && device_matches(c.device, device)) ++n;
  }
  return n;
}

StatsReader::StatsReader(std::unique_ptr<Segment> segment) : segment_(std::move(segment)) {}

StatsReader::~StatsReader() = default;

std::unique_ptr<StatsReader> StatsReader::open(const std::string& shm_name, std::string* error) {
  auto segment = Segment::attach(shm_name, error);
  if (!segment) return nullptr;
  return std::unique_ptr<StatsReader>(new StatsReader(std::move(segment)));
}

StatsSample StatsReader::sample() {
  StatsSample out;
  const uint32_t n = segment_->device_count();
  std::vector<std::unique_ptr<DeviceLock>> locks;
  locks.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    locks.push_back(std::make_unique<DeviceLock>(segment_->device(i)));
  }
  // One instant for every device: read after all locks are held.
  out.device_clock_ns = monotonic_ns();
  out.timeslice_ns = segment_->config().timeslice_ns;
  for (uint32_t i = 0; i < n; ++i) {
    if (!locks[i]->held()) continue;
    bring_to_now(segment_->device(i), out.device_clock_ns, &segment_->board(),
                 /*force_liveness=*/true);
    copy_device(*segment_, i, &out);
  }
  return out;
}

std::string segment_name_from_environment() {
  const char* name = std::getenv("SIMGPU_SHM");
  return (name != nullptr && *name != '\0') ? name : default_shm_name();
}

bool remove_segment(const std::string& shm_name) {
  return unlink_segment(shm_name);
}

std::string format_text(const StatsSample& s) {
  std::ostringstream out;
  out << "device clock " << s.device_clock_ns << " ns, timeslice " << s.timeslice_ns / 1000
      << " us\n";
  for (const DeviceSample& d : s.devices) {
    out << "device " << d.index << " " << d.pci_bus_id << " \"" << d.name << "\" busy " << d.busy_ns
        << " ns, memory " << (d.memory_used_bytes >> 20) << "/" << (d.memory_total_bytes >> 20)
        << " MiB in " << d.allocations << " allocations\n";
  }
  out << "dev slot pid      alive queued busy_ns          label\n";
  for (const ContextSample& c : s.contexts) {
    char line[160];
    std::snprintf(line, sizeof line, "%3u %4u %-8d %-5s %6u %-16llu %s\n", c.device, c.slot, c.pid,
                  c.alive ? "yes" : "no", c.queued_ops, static_cast<unsigned long long>(c.busy_ns),
                  c.label.c_str());
    out << line;
  }
  return out.str();
}

std::string format_json(const StatsSample& s) {
  nlohmann::json j;
  j["device_clock_ns"] = s.device_clock_ns;
  j["timeslice_ns"] = s.timeslice_ns;
  j["devices"] = nlohmann::json::array();
  for (const DeviceSample& d : s.devices) {
    j["devices"].push_back({{"index", d.index},
                            {"name", d.name},
                            {"pci_bus_id", d.pci_bus_id},
                            {"busy_ns", d.busy_ns},
                            {"memory_used_bytes", d.memory_used_bytes},
                            {"memory_total_bytes", d.memory_total_bytes},
                            {"allocations", d.allocations}});
  }
  j["contexts"] = nlohmann::json::array();
  for (const ContextSample& c : s.contexts) {
    j["contexts"].push_back({{"pid", c.pid},
                             {"device", c.device},
                             {"slot", c.slot},
                             {"generation", c.generation},
                             {"label", c.label},
                             {"busy_ns", c.busy_ns},
                             {"queued_ops", c.queued_ops},
                             {"alive", c.alive},
                             {"created_ns", c.created_ns},
                             {"retired_ns", c.retired_ns}});
  }
  return j.dump(2);
}

}  // namespace egpu::simgpu
