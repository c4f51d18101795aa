// Unique shm names for tests that run in parallel, unlinked when done.
#pragma once

#include <unistd.h>

#include <atomic>
#include <string>

#include "model/segment.h"

namespace egpu::simgpu::testing {

class ScopedSegmentName {
 public:
  explicit ScopedSegmentName(const std::string& tag) {
    static std::atomic<int> counter{0};
    name_ =
        "/simgpu-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    unlink_segment(name_);
  }
  ~ScopedSegmentName() { unlink_segment(name_); }
  ScopedSegmentName(const ScopedSegmentName&) = delete;
  ScopedSegmentName& operator=(const ScopedSegmentName&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

}  // namespace egpu::simgpu::testing
