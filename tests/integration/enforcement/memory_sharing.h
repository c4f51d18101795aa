// Device memory shared between two jobs' processes through the shim, for the
// memory-quota tests: memory-probe share-export in one instance, share-import
// in another, each holding until the test lets it go. Also the memory
// figures these tests compare: the agent's per-instance accounting and
// simgpu's ground truth.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "enforced_node.h"
#include "simgpu_stats.h"

namespace egpu::integration {

// simgpu's device memory in use (ground truth).
inline uint64_t simgpu_memory_used(EnforcedNode& node) {
  std::string error;
  auto reader = simgpu::StatsReader::open(node.gpu().shm_name(), &error);
  if (!reader) return 0;
  return reader->sample().devices.at(0).memory_used_bytes;
}

// The instance's used memory as the agent reports it (egpuctl status).
inline uint64_t agent_memory_used(EnforcedNode& node, uint64_t job) {
  const CtlResult r = node.egpuctl({"--json", "status"});
  if (r.code != 0) return UINT64_MAX;
  const auto status = nlohmann::json::parse(r.out, nullptr, false);
  if (status.is_discarded()) return UINT64_MAX;
  for (const auto& gpu : status.value("gpus", nlohmann::json::array())) {
    for (const auto& inst : gpu.value("instances", nlohmann::json::array())) {
      if (inst.value("job", uint64_t{0}) == job)
        return inst.value("memory_used_bytes", uint64_t{0});
    }
  }
  return UINT64_MAX;
}

inline bool wait_for_file(const std::string& path, std::chrono::milliseconds timeout) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (!std::filesystem::exists(path)) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// An exporter (job `from`) and an importer (job `to`) of `size` bytes of
// `kind` (ipc, vmm or pool), both holding once started.
class SharedMemoryPair {
 public:
  SharedMemoryPair(EnforcedNode& node, const std::string& kind, uint64_t from, uint64_t to,
                   uint64_t size)
      : dir_(::testing::TempDir() + "/share-" + kind + "-" + std::to_string(::getpid())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::string probe = memory_probe_path();
    exporter_ = node.start_program(from, {probe, "share-export", kind, std::to_string(size)}, 0,
                                   {{"PROBE_HANDLE_FILE", dir_ + "/handle"},
                                    {"PROBE_MARK", dir_ + "/exported"},
                                    {"PROBE_HOLD_UNTIL", dir_ + "/exporter-go"}});
    if (!wait_for_file(dir_ + "/exported", std::chrono::seconds(30))) return;
    importer_ = node.start_program(to, {probe, "share-import", kind}, 0,
                                   {{"PROBE_HANDLE_FILE", dir_ + "/handle"},
                                    {"PROBE_MARK", dir_ + "/imported"},
                                    {"PROBE_HOLD_UNTIL", dir_ + "/importer-go"}});
    ready_ = wait_for_file(dir_ + "/imported", std::chrono::seconds(30));
  }
  ~SharedMemoryPair() {
    std::ofstream(dir_ + "/exporter-go").put('\n');
    std::ofstream(dir_ + "/importer-go").put('\n');
    if (exporter_) exporter_->wait_for(std::chrono::seconds(30));
    if (importer_) importer_->wait_for(std::chrono::seconds(30));
    std::filesystem::remove_all(dir_);
  }
  SharedMemoryPair(const SharedMemoryPair&) = delete;
  SharedMemoryPair& operator=(const SharedMemoryPair&) = delete;

  // Both hold the memory (the importer has imported, or been refused).
  bool ready() const { return ready_; }
  std::string errors() const {
    return (exporter_ ? exporter_->stderr_text() : "") +
           (importer_ ? importer_->stderr_text() : "");
  }
  // Lets one side free its memory and exit; its JSON report.
  nlohmann::json finish_exporter() { return finish(exporter_, "/exporter-go"); }
  nlohmann::json finish_importer() { return finish(importer_, "/importer-go"); }

 private:
  nlohmann::json finish(std::unique_ptr<test_child::ChildProcess>& p, const char* go) {
    std::ofstream(dir_ + go).put('\n');
    if (!p) return nlohmann::json();
    const auto st = p->wait_for(std::chrono::seconds(60));
    EXPECT_TRUE(st && st->success()) << p->stderr_text();
    return nlohmann::json::parse(p->stdout_text(), nullptr, false);
  }

  std::string dir_;
  std::unique_ptr<test_child::ChildProcess> exporter_;
  std::unique_ptr<test_child::ChildProcess> importer_;
  bool ready_ = false;
};

}  // namespace egpu::integration
