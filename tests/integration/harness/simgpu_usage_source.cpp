// The share sampler's source for the simulated GPU: simgpu's own statistics.
#include <memory>
#include <string>

#include "share_sampler.h"
#include "simgpu_stats.h"

namespace egpu::harness {

namespace {

UsageSample convert(const simgpu::StatsSample& stats) {
  UsageSample sample;
  sample.taken_at = std::chrono::steady_clock::now();
  sample.clock_ns = stats.device_clock_ns;
  for (const simgpu::ContextSample& context : stats.contexts) {
    sample.contexts.push_back({context.pid, static_cast<int>(context.device), context.label,
                               context.busy_ns, context.alive});
  }
  return sample;
}

}  // namespace

ShareSampler::Source simgpu_usage_source(const std::string& shm_name) {
  // Shared so the std::function stays copyable; only the sampler thread uses it.
  auto reader = std::make_shared<std::unique_ptr<simgpu::StatsReader>>();
  return [reader, shm_name]() -> std::optional<UsageSample> {
    if (!*reader) {
      std::string error;
      *reader = simgpu::StatsReader::open(shm_name, &error);  // none until a process creates it
      if (!*reader) return std::nullopt;
    }
    return convert((*reader)->sample());
  };
}

}  // namespace egpu::harness
