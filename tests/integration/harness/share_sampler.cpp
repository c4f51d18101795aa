#include "share_sampler.h"

#include <utility>

namespace egpu::harness {

ShareSampler::ShareSampler(Source source, std::chrono::milliseconds interval)
    : source_(std::move(source)), interval_(interval), thread_([this] { loop(); }) {}

ShareSampler::~ShareSampler() {
  stop();
}

void ShareSampler::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void ShareSampler::loop() {
  // Absolute ticks, so slow readings do not stretch the interval.
  auto next = std::chrono::steady_clock::now();
  for (;;) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
    }
    std::optional<UsageSample> sample = source_();
    if (sample) {
      std::lock_guard lock(mutex_);
      samples_.push_back(std::move(*sample));
    }
    next += interval_;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;
    std::this_thread::sleep_until(next);
  }
}

bool ShareSampler::wait_until(const std::function<bool(const UsageSample&)>& condition,
                              std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const std::optional<UsageSample> sample = latest();
    if (sample && condition(*sample)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::optional<UsageSample> ShareSampler::latest() const {
  std::lock_guard lock(mutex_);
  if (samples_.empty()) return std::nullopt;
  return samples_.back();
}

std::vector<UsageSample> sample_for(const ShareSampler::Source& source,
                                    std::chrono::milliseconds interval,
                                    std::chrono::milliseconds duration) {
  std::vector<UsageSample> samples;
  const auto start = std::chrono::steady_clock::now();
  for (auto tick = start; tick <= start + duration; tick += interval) {
    std::this_thread::sleep_until(tick);
    if (std::optional<UsageSample> sample = source()) samples.push_back(std::move(*sample));
  }
  return samples;
}

std::function<bool(const UsageSample&)> labels_busy(std::vector<std::string> labels) {
  return [labels = std::move(labels)](const UsageSample& sample) {
    for (const std::string& label : labels) {
      bool busy = false;
      for (const ContextUsage& context : sample.contexts) {
        if (context.label == label && context.busy_ns > 0) busy = true;
      }
      if (!busy) return false;
    }
    return true;
  };
}

std::vector<UsageSample> ShareSampler::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

}  // namespace egpu::harness
