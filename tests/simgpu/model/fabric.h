// A fabric: a small shm segment holding only a CollectiveBoard, so that
// collectives of several device segments (simulated nodes) meet on one board.
// Created race-free like the device segment (O_EXCL, then an `initialised`
// flag the others wait for; one whose creator died unfinished is unlinked
// and created again).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "model/layout.h"

namespace egpu::simgpu {

class Fabric {
 public:
  // Attaches to the fabric `name`, creating it (with `mode`) if it does not
  // exist. Returns nullptr and explains in *error on failure.
  static std::unique_ptr<Fabric> open_or_create(const std::string& name, uint32_t mode,
                                                std::string* error);
  ~Fabric();
  Fabric(const Fabric&) = delete;
  Fabric& operator=(const Fabric&) = delete;

  CollectiveBoard& board() const { return header_->board; }

 private:
  explicit Fabric(FabricHeader* header) : header_(header) {}
  FabricHeader* header_;
};

// Whether `name` is usable as a fabric (and POSIX shm) name: /name, no other slash.
bool valid_fabric_name(const std::string& name);

bool unlink_fabric(const std::string& name);

}  // namespace egpu::simgpu
