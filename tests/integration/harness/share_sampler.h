// Samples a GPU's usage every N ms on a background thread, for share
// measurements while the test does other things (kills a process, waits).
#pragma once

#include <chrono>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "usage_sample.h"

namespace egpu::harness {

class ShareSampler {
 public:
  // Returns a reading, or nullopt while there is nothing to read yet (the
  // segment does not exist before the first process creates it).
  using Source = std::function<std::optional<UsageSample>()>;

  ShareSampler(Source source, std::chrono::milliseconds interval);
  ~ShareSampler();  // stops the thread
  ShareSampler(const ShareSampler&) = delete;
  ShareSampler& operator=(const ShareSampler&) = delete;

  void stop();
  // Blocks until the latest reading satisfies `condition` or `timeout` passes;
  // false on timeout.
  bool wait_until(const std::function<bool(const UsageSample&)>& condition,
                  std::chrono::milliseconds timeout) const;
  std::optional<UsageSample> latest() const;
  std::vector<UsageSample> samples() const;

 private:
  void loop();

  Source source_;
  std::chrono::milliseconds interval_;
  mutable std::mutex mutex_;
  std::vector<UsageSample> samples_;
  bool stopping_ = false;
  std::thread thread_;
};

// Samples `source` every `interval` for `duration` on the calling thread (the
// readings that exist; none while the source has nothing to read).
std::vector<UsageSample> sample_for(const ShareSampler::Source& source,
                                    std::chrono::milliseconds interval,
                                    std::chrono::milliseconds duration);

// A condition for wait_until: every label has some busy time (on any device).
std::function<bool(const UsageSample&)> labels_busy(std::vector<std::string> labels);

// A source reading the simulated GPU with shared-memory segment `shm_name`.
ShareSampler::Source simgpu_usage_source(const std::string& shm_name);

}  // namespace egpu::harness
