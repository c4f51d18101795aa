#include "tools/clustersim/experiments.h"

#include <algorithm>
#include <numeric>
#include <random>

namespace egpu::clustersim {
namespace {

// Draws in [0, n) from a standard engine (std::mt19937_64's output is fixed by
// the standard; distributions are not, so none is used): the same seed gives
// the same arrivals everywhere.
uint64_t draw(std::mt19937_64& engine, uint64_t n) {
  return engine() % n;
}

std::vector<Demand> demands(const SimulationSetup& setup, bool whole_gpus) {
  std::vector<Demand> out;
  out.reserve(setup.tasks.size());
  for (const TaskSpec& task : setup.tasks) {
    out.push_back(to_demand(task, setup.granularity, whole_gpus));
  }
  return out;
}

// The trace's nodes as they are in its file.
std::vector<const NodeSpec*> in_file_order(std::span<const NodeSpec> nodes) {
  std::vector<const NodeSpec*> out;
  out.reserve(nodes.size());
  for (const NodeSpec& node : nodes)
    out.push_back(&node);
  return out;
}

}  // namespace

std::vector<const NodeSpec*> node_sample(std::span<const NodeSpec> nodes, uint64_t seed,
                                         uint64_t count) {
  std::vector<std::size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::mt19937_64 engine(seed);
  for (std::size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[draw(engine, i)]);
  std::vector<const NodeSpec*> sample;
  sample.reserve(count);
  for (uint64_t i = 0; i < count; ++i)
    sample.push_back(&nodes[order[i % order.size()]]);
  return sample;
}

InflationRun run_inflation(const SimulationSetup& setup, Policy policy, uint64_t seed) {
  PolicyPlacer placer(policy, setup.measure, setup.multiple_sharing);
  const std::vector<Demand> pool = demands(setup, placer.whole_gpus());
  InflationRun run{{}, {}, 0, 0, 0, 0, ClusterState(in_file_order(setup.nodes), setup.egpu)};
  ClusterState& cluster = run.final_state;
  const double capacity = static_cast<double>(cluster.gpu_capacity_milli());
  std::mt19937_64 engine(seed);
  uint64_t arrived = 0;  // requested GPU, the trace's own thousandths
  uint64_t placed = 0;
  std::size_t percent = 0;
  auto record_up_to = [&](std::size_t upto) {
    for (; percent <= upto && percent <= 100; ++percent) {
      run.allocated_pct.push_back(100.0 * static_cast<double>(cluster.gpu_allocated_milli()) /
                                  capacity);
      run.placed_pct.push_back(100.0 * static_cast<double>(placed) / capacity);
    }
  };
  record_up_to(0);
  const bool any_gpu_task =
      std::any_of(pool.begin(), pool.end(), [](const Demand& d) { return d.gpus > 0; });
  if (capacity == 0 || !any_gpu_task) {
    record_up_to(100);  // nothing can ever arrive: flat curves, not an endless loop
    return run;
  }
  while (percent <= 100) {
    const std::size_t index = draw(engine, setup.tasks.size());
    const Demand& demand = pool[index];
    ++run.tasks_arrived;
    bool done = false;
    if (auto choice = placer.choose(cluster, demand)) {
      if (cluster.place(choice->node, demand, choice->gpus, choice->split)) {
        done = true;
        if (!choice->split.empty()) ++run.tasks_split;
      } else {
        ++run.agent_refusals;
      }
    }
    if (done) {
      placed += setup.tasks[index].gpu_demand_milli();
    } else {
      ++run.tasks_dropped;
    }
    arrived += setup.tasks[index].gpu_demand_milli();
    // Percent points reached by this arrival (records the state after it).
    const double reached = 100.0 * static_cast<double>(arrived) / capacity;
    if (reached >= static_cast<double>(percent)) {
      record_up_to(static_cast<std::size_t>(reached));
    }
  }
  return run;
}

std::vector<std::optional<Choice>> place_in_order(const SimulationSetup& setup, Policy policy) {
  ClusterState cluster(in_file_order(setup.nodes), setup.egpu);
  PolicyPlacer placer(policy, setup.measure, setup.multiple_sharing);
  std::vector<std::optional<Choice>> placed;
  for (const Demand& demand : demands(setup, placer.whole_gpus())) {
    auto choice = placer.choose(cluster, demand);
    if (choice && !cluster.place(choice->node, demand, choice->gpus, choice->split)) choice.reset();
    placed.push_back(std::move(choice));
  }
  return placed;
}

GpusNeeded gpus_needed(const SimulationSetup& setup, Policy policy, uint64_t seed) {
  PolicyPlacer probe(policy, setup.measure, setup.multiple_sharing);
  const std::vector<Demand> all = demands(setup, probe.whole_gpus());
  auto places_all = [&](uint64_t count) {
    ClusterState cluster(node_sample(setup.nodes, seed, count), setup.egpu);
    PolicyPlacer placer(policy, setup.measure, setup.multiple_sharing);
    for (const Demand& demand : all) {
      const auto choice = placer.choose(cluster, demand);
      if (!choice || !cluster.place(choice->node, demand, choice->gpus, choice->split))
        return false;
    }
    return true;
  };
  // Start where the GPUs just hold the requests, grow by a tenth until every
  // task finds a place, then bisect.
  uint64_t requested = 0;
  for (const Demand& demand : all)
    requested += demand.gpu_demand_milli();
  uint64_t count = 1;
  {
    uint64_t gpus = 0;
    for (const NodeSpec* node : node_sample(setup.nodes, seed, 64 * setup.nodes.size())) {
      gpus += uint64_t{node->gpus} * kMilliPerGpu;
      if (gpus >= requested) break;
      ++count;
    }
  }
  // Fewer nodes than `count` hold less GPU than the tasks ask: they fail.
  uint64_t low = count - 1;  // the largest count known to fail
  uint64_t high = count;
  const uint64_t limit = 64 * setup.nodes.size();
  while (!places_all(high)) {
    low = high;
    high = std::max(high + 1, high + high / 10);
    if (high > limit) return {};
  }
  while (high - low > 1) {
    const uint64_t middle = low + (high - low) / 2;
    if (places_all(middle)) {
      high = middle;
    } else {
      low = middle;
    }
  }
  GpusNeeded needed{high, 0};
  for (const NodeSpec* node : node_sample(setup.nodes, seed, high))
    needed.gpus += node->gpus;
  return needed;
}

}  // namespace egpu::clustersim
