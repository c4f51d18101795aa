// What the security tests check of an agent a hostile job worked on: its
// GPU page's heartbeat still advances (every GPU's ticks run on the thread
// that writes it).
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/unique_fd.h"
#include "tests/agent/agent_fixture.h"

namespace egpu::test {

// True when GPU 0's heartbeat moves within 20 s (it moves every tick: a
// loaded machine may still be slow to run the agent).
inline bool heartbeat_advances(const AgentProcess& agent) {
  const std::string page = agent.dir() + "/run/gpu0";
  UniqueFd fd(open(page.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return false;
  auto map = shm::map_fd(fd.get(), sizeof(shm::GpuPage), shm::Access::kReadOnly);
  if (!map) return false;
  const auto* gpu = map->as<const shm::GpuPage>();
  const int64_t first = gpu->heartbeat_ns.load();
  for (int i = 0; i < 1000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (gpu->heartbeat_ns.load() != first) return true;
  }
  return false;
}

}  // namespace egpu::test
