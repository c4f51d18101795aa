// What a shim does to report request latencies: adds them to its instance
// page's histogram. For agent tests that drive the latency control.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/shm/pages.h"
#include "core/slo/latency_histogram.h"
#include "nodeagent/instance_runtime.h"

namespace egpu::test {

// Writes `count` latencies of `ns` into the instance's page, as its shims do.
inline void report_latency(const std::string& runtime_dir, uint64_t id, int64_t ns,
                           uint64_t count) {
  const std::string path = agent::InstanceRuntime::page_path(runtime_dir, id);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  void* p = mmap(nullptr, sizeof(shm::InstancePage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  ASSERT_NE(p, MAP_FAILED);
  static_cast<shm::InstancePage*>(p)->latency_counts[slo::latency_bucket(ns)].fetch_add(count);
  munmap(p, sizeof(shm::InstancePage));
}

}  // namespace egpu::test
