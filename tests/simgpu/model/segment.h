// The shared segment that holds every simulated device: creation (race-free
// across processes starting together), attachment and the RAII mapping.
//
// The first process creates it with O_EXCL, sizes it, initialises every
// device and sets header.initialised last; the others wait (bounded) for that
// flag. A segment whose creator died before finishing is unlinked and
// created again. A stale but complete segment (all its processes died) is
// used as it is, not reset: the contexts of dead processes are retired and
// their memory freed by the first liveness sweep, their statistics remain.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/config.h"
#include "model/fabric.h"
#include "model/layout.h"

namespace egpu::simgpu {

size_t segment_bytes(uint32_t device_count);

class Segment {
 public:
  // Attaches to the segment config.shm_name, creating it from `config` if it
  // does not exist. Returns nullptr and explains in *error on failure.
  static std::unique_ptr<Segment> open_or_create(const SimConfig& config, std::string* error);
  // Attaches to an existing segment only.
  static std::unique_ptr<Segment> attach(const std::string& name, std::string* error);

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  const std::string& name() const { return name_; }
  bool created_here() const { return created_here_; }
  SegmentHeader& header() const { return *static_cast<SegmentHeader*>(base_); }
  const SegmentConfig& config() const { return header().config; }
  uint32_t device_count() const { return header().config.device_count; }
  DeviceShared& device(uint32_t index) const;
  // Where this segment's collectives meet: its fabric's board if the
  // creator named one (SIMGPU_FABRIC), else its own.
  CollectiveBoard& board() const;

  // A fresh virtual-address range (cuMemAddressReserve), unique across
  // processes; 0 when the range is exhausted.
  uint64_t reserve_va(uint64_t size, uint64_t alignment) const;

 private:
  Segment(std::string name, void* base, size_t bytes, bool created_here);
  // Maps the fabric the header names, if any; false (with *error) on failure.
  bool attach_fabric(std::string* error);

  std::string name_;
  void* base_;
  size_t bytes_;
  bool created_here_;
  std::unique_ptr<Fabric> fabric_;
};

bool unlink_segment(const std::string& name);

}  // namespace egpu::simgpu
