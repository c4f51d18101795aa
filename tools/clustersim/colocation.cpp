#include "tools/clustersim/colocation.h"

#include <algorithm>
#include <limits>
#include <map>
#include <vector>

#include "sim/faa_sim.h"

namespace egpu::clustersim {
namespace {

constexpr faa::Nanos kWarmup = 200 * faa::kMillisecond;
constexpr faa::Nanos kRun = 1200 * faa::kMillisecond;
constexpr faa::Nanos kKernel = 1 * faa::kMillisecond;

struct Tenant {
  uint32_t milli;
  bool latency_sensitive;
  auto operator<=>(const Tenant&) const = default;
};

// Shares under FAA of greedy tenants with these targets (burst mode, as egpu
// steps run by default), measured after a warm-up.
std::vector<double> faa_shares(const std::vector<Tenant>& tenants) {
  faa::sim::FaaSim sim(faa::sim::SimOptions{});
  for (const Tenant& tenant : tenants) {
    sim.add(tenant.milli / static_cast<double>(kMilliPerGpu), Mode::kBurst,
            faa::sim::Workload::greedy(kKernel));
  }
  sim.run_until(kRun);
  std::vector<double> shares;
  for (std::size_t i = 0; i < tenants.size(); ++i)
    shares.push_back(sim.share(i, kWarmup, kRun));
  return shares;
}

struct Accumulator {
  uint64_t tasks = 0;
  double sum = 0;
  double min = std::numeric_limits<double>::infinity();
  uint64_t below = 0;
  void add(double ratio) {
    ++tasks;
    sum += ratio;
    min = std::min(min, ratio);
    if (ratio < 0.95) ++below;
  }
  ShareOutcome outcome() const {
    if (tasks == 0) return {};
    return {tasks, sum / static_cast<double>(tasks), min,
            100.0 * static_cast<double>(below) / static_cast<double>(tasks)};
  }
};

}  // namespace

ColocationShares colocation_shares(const ClusterState& cluster) {
  std::map<std::pair<std::size_t, uint32_t>, std::vector<Tenant>> by_gpu;
  for (const auto& placed : cluster.live()) {
    if (!placed.demand->shares_gpu()) continue;
    // A share split over GPUs is a tenant of each, with its part there.
    for (std::size_t i = 0; i < placed.gpus->size(); ++i) {
      by_gpu[{placed.node, (*placed.gpus)[i]}].push_back(
          {(*placed.milli)[i], placed.demand->qos == Qos::kLatencySensitive});
    }
  }
  ColocationShares result;
  Accumulator ls_faa, ls_slicing, be_faa, be_slicing;
  // GPUs with the same tenants behave the same: simulate each mix once.
  std::map<std::vector<Tenant>, std::vector<double>> simulated;
  for (auto& [gpu, tenants] : by_gpu) {
    const bool has_ls = std::any_of(tenants.begin(), tenants.end(),
                                    [](const Tenant& t) { return t.latency_sensitive; });
    const bool has_be = std::any_of(tenants.begin(), tenants.end(),
                                    [](const Tenant& t) { return !t.latency_sensitive; });
    if (!has_ls || !has_be) continue;
    ++result.gpus;
    std::sort(tenants.begin(), tenants.end());
    auto found = simulated.find(tenants);
    if (found == simulated.end()) found = simulated.emplace(tenants, faa_shares(tenants)).first;
    for (std::size_t i = 0; i < tenants.size(); ++i) {
      const double asked = tenants[i].milli / static_cast<double>(kMilliPerGpu);
      const double slicing = 1.0 / static_cast<double>(tenants.size());
      auto& faa_acc = tenants[i].latency_sensitive ? ls_faa : be_faa;
      auto& slicing_acc = tenants[i].latency_sensitive ? ls_slicing : be_slicing;
      faa_acc.add(found->second[i] / asked);
      slicing_acc.add(std::min(slicing, 1.0) / asked);
    }
  }
  result.ls_faa = ls_faa.outcome();
  result.ls_time_slicing = ls_slicing.outcome();
  result.be_faa = be_faa.outcome();
  result.be_time_slicing = be_slicing.outcome();
  return result;
}

}  // namespace egpu::clustersim
