#include "tools/clustersim/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace egpu::clustersim {

FragmentationMeasure::FragmentationMeasure(std::span<const Demand> workload,
                                           double popularity_pct) {
  // (CPU, GPUs, per-GPU share) -> count
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint64_t> counts;
  uint64_t total = 0;
  for (const Demand& demand : workload) {
    if (demand.gpus == 0) continue;
    ++counts[{demand.cpu_milli, demand.gpus, demand.gpu_milli}];
    ++total;
  }
  if (total == 0) return;
  // Most popular first; equal counts in request order, so the choice is fixed.
  std::vector<std::pair<uint64_t, std::tuple<uint32_t, uint32_t, uint32_t>>> ranked;
  for (const auto& [kind, count] : counts)
    ranked.emplace_back(count, kind);
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  const double wanted = popularity_pct / 100.0 * static_cast<double>(total);
  uint64_t covered = 0;
  std::size_t kept = 0;
  while (kept < ranked.size() && static_cast<double>(covered) < wanted) {
    for (std::size_t end = std::min(kept + 10, ranked.size()); kept < end; ++kept) {
      covered += ranked[kept].first;
    }
  }
  kinds_ = kept;
  // (GPUs, per-GPU share) -> CPU -> weight, renormalised over the kept kinds.
  std::map<std::pair<uint32_t, uint32_t>, std::map<uint32_t, double>> by_request;
  for (std::size_t i = 0; i < kept; ++i) {
    const auto& [cpu, gpus, milli] = ranked[i].second;
    by_request[{gpus, milli}][cpu] +=
        static_cast<double>(ranked[i].first) / static_cast<double>(covered);
  }
  for (const auto& [request, by_cpu] : by_request) {
    GpuRequest entry{request.first, request.second, {}, {}, 0};
    double running = 0;
    for (const auto& [cpu, weight] : by_cpu) {
      running += weight;
      entry.cpu_milli.push_back(cpu);
      entry.weight_upto.push_back(running);
    }
    entry.weight = running;
    requests_.push_back(std::move(entry));
  }
}

double FragmentationMeasure::node_fragment(uint32_t cpu_free_milli,
                                           std::span<const uint32_t> gpu_free_milli) const {
  double free_total = 0;
  for (uint32_t free : gpu_free_milli)
    free_total += free;
  if (free_total == 0) return 0;
  double fragment = 0;
  for (const GpuRequest& request : requests_) {
    uint32_t roomy = 0;
    double too_small = 0;
    for (uint32_t free : gpu_free_milli) {
      if (free >= request.gpu_milli) {
        ++roomy;
      } else {
        too_small += free;
      }
    }
    if (roomy < request.gpus) {
      fragment += request.weight * free_total;
      continue;
    }
    // Kinds with CPU to spare run here and strand only the too-small GPUs;
    // the others cannot run here at all.
    const auto upto =
        std::upper_bound(request.cpu_milli.begin(), request.cpu_milli.end(), cpu_free_milli);
    const double runnable =
        upto == request.cpu_milli.begin()
            ? 0.0
            : request.weight_upto[static_cast<std::size_t>(upto - request.cpu_milli.begin()) - 1];
    fragment += runnable * too_small + (request.weight - runnable) * free_total;
  }
  return fragment;
}

}  // namespace egpu::clustersim
