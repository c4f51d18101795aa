// What a shim does to report request latencies: adds them to its instance
// page's histogram; and processes that wait at the gate as a share-bound
// server's do. For agent tests that drive the latency control.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/shm/pages.h"
#include "core/slo/latency_histogram.h"
#include "nodeagent/instance_runtime.h"
#include "tests/agent/agent_fixture.h"

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

// Attached processes whose pages say a thread of theirs is blocked at the
// gate (busy), as a shim's does while it waits for the slice. Two of them,
// of instances on one GPU, take the slice in turns: each waits for the GPU
// while the other holds it, which is what the latency control asks of an
// instance before it lends it share (more share lowers only latency spent
// waiting). Killed with this.
class GateWaiters {
 public:
  GateWaiters() = default;
  GateWaiters(const GateWaiters&) = delete;
  GateWaiters& operator=(const GateWaiters&) = delete;
  ~GateWaiters() {
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  // A process of instance `id` (job `job`, step 0, GPU `gpu`) as `owner`.
  void add(const AgentProcess& agent, uint64_t job, uint64_t id, uid_t owner, uint32_t gpu = 0) {
    const pid_t pid = attached_process(agent.socket(), job, owner, {}, gpu);
    ASSERT_GT(pid, 0) << "job " << job << " could not attach";
    pids_.push_back(pid);
    const std::string path = agent::InstanceRuntime::page_path(agent.dir() + "/run", id);
    const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << path;
    void* p = mmap(nullptr, sizeof(shm::InstancePage), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    ASSERT_NE(p, MAP_FAILED);
    auto* page = static_cast<shm::InstancePage*>(p);
    bool found = false;
    for (auto& slot : page->procs) {
      if (slot.pid.load() != pid) continue;
      slot.busy.store(1);
      found = true;
    }
    munmap(p, sizeof(shm::InstancePage));
    ASSERT_TRUE(found) << "no slot of process " << pid << " in " << path;
    kill(pid, SIGUSR1);  // it wakes the agent, as a shim does when it starts to wait
  }

 private:
  std::vector<pid_t> pids_;
};

}  // namespace egpu::test
