// egpu-clustersim: replays the openb trace on its 1,213 nodes under each
// placement policy and prints one JSON object (see tools/clustersim/README.md).
#include <getopt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/config/egpu_config.h"
#include "tools/clustersim/colocation.h"
#include "tools/clustersim/experiments.h"
#include "tools/clustersim/openb_trace.h"

namespace {

using namespace egpu::clustersim;

struct Options {
  std::string nodes_path;
  std::string tasks_path;
  std::vector<Policy> policies = all_policies();
  int seeds = 5;
  Granularity granularity = Granularity::kSlurm;
  std::string config_path;
  std::string curves_path;
  bool place_in_order = false;
  bool multiple_sharing = false;
  int node_orders = 3;  // GPUs-needed searches, each on its own node order; 0: none
  double fgd_popularity = 60;
  unsigned threads = std::max(1U, std::thread::hardware_concurrency());
};

void usage(std::FILE* out) {
  std::fputs(
      "usage: egpu-clustersim --nodes NODES.csv --tasks TASKS.csv [options]\n"
      "  --policies LIST     comma list of whole,first-fit,least-loaded,best-fit,fgd,fgd-node,\n"
      "                      weighted (default: "
      "all)\n"
      "  --seeds N           inflation runs per policy, seeds 1..N (default 5)\n"
      "  --granularity G     slurm (whole CPUs, egpu units, the agents admit shares; default)\n"
      "                      or trace (the trace's thousandths, no agent: FGD's own model)\n"
      "  --config FILE       egpu.conf whose admission settings the agents use\n"
      "  --curves FILE       write the mean inflation curves as CSV\n"
      "  --node-orders N     GPUs-needed searches per policy, node orders 1..N (default 3; 0: "
      "none)\n"
      "  --multiple-sharing  model SelectTypeParameters=MULTIPLE_SHARING_GRES_PJ (24.11): Slurm\n"
      "                      may split a share over several GPUs of the node\n"
      "  --fgd-popularity P  FGD's target workload: the most popular task kinds covering P%\n"
      "                      of the GPU tasks (default 60, as FGD's simulator)\n"
      "  --threads N         policies run in parallel (default: the CPUs)\n"
      "  --place-in-order    only place the tasks in file order on the nodes in file order\n"
      "                      with the first policy and print task,node,gpus (CSV)\n"
      "Prints one JSON object; see tools/clustersim/README.md.\n",
      out);
}

std::optional<Options> parse(int argc, char** argv) {
  Options options;
  static const option longs[] = {{"nodes", required_argument, nullptr, 'n'},
                                 {"tasks", required_argument, nullptr, 't'},
                                 {"policies", required_argument, nullptr, 'p'},
                                 {"seeds", required_argument, nullptr, 's'},
                                 {"granularity", required_argument, nullptr, 'g'},
                                 {"config", required_argument, nullptr, 'c'},
                                 {"curves", required_argument, nullptr, 'o'},
                                 {"node-orders", required_argument, nullptr, 'N'},
                                 {"fgd-popularity", required_argument, nullptr, 'f'},
                                 {"threads", required_argument, nullptr, 'j'},
                                 {"place-in-order", no_argument, nullptr, 'P'},
                                 {"multiple-sharing", no_argument, nullptr, 'M'},
                                 {"help", no_argument, nullptr, 'h'},
                                 {nullptr, 0, nullptr, 0}};
  // A whole number in [low, high], or nullopt after saying what was wrong.
  auto number = [](const char* flag, const char* text, long low, long high) -> std::optional<int> {
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (*text == '\0' || *end != '\0' || value < low || value > high) {
      std::fprintf(stderr, "egpu-clustersim: %s wants a number in %ld..%ld, not '%s'\n", flag, low,
                   high, text);
      return std::nullopt;
    }
    return static_cast<int>(value);
  };
  int option = 0;
  while ((option = getopt_long(argc, argv, "h", longs, nullptr)) != -1) {
    switch (option) {
      case 'n':
        options.nodes_path = optarg;
        break;
      case 't':
        options.tasks_path = optarg;
        break;
      case 'p': {
        options.policies.clear();
        std::string list = optarg;
        std::size_t start = 0;
        while (start <= list.size()) {
          const std::size_t comma = std::min(list.find(',', start), list.size());
          const std::string name = list.substr(start, comma - start);
          const auto policy = parse_policy(name);
          if (!policy) {
            std::fprintf(stderr, "egpu-clustersim: unknown policy '%s' (see --help)\n",
                         name.c_str());
            return std::nullopt;
          }
          options.policies.push_back(*policy);
          start = comma + 1;
        }
        break;
      }
      case 's': {
        const auto seeds = number("--seeds", optarg, 1, 1000);
        if (!seeds) return std::nullopt;
        options.seeds = *seeds;
        break;
      }
      case 'g':
        if (std::string(optarg) == "slurm") {
          options.granularity = Granularity::kSlurm;
        } else if (std::string(optarg) == "trace") {
          options.granularity = Granularity::kTrace;
        } else {
          std::fprintf(stderr, "egpu-clustersim: --granularity is slurm or trace, not '%s'\n",
                       optarg);
          return std::nullopt;
        }
        break;
      case 'c':
        options.config_path = optarg;
        break;
      case 'o':
        options.curves_path = optarg;
        break;
      case 'N': {
        const auto orders = number("--node-orders", optarg, 0, 1000);
        if (!orders) return std::nullopt;
        options.node_orders = *orders;
        break;
      }
      case 'f': {
        const auto pct = number("--fgd-popularity", optarg, 1, 100);
        if (!pct) return std::nullopt;
        options.fgd_popularity = *pct;
        break;
      }
      case 'j': {
        const auto threads = number("--threads", optarg, 1, 1000);
        if (!threads) return std::nullopt;
        options.threads = static_cast<unsigned>(*threads);
        break;
      }
      case 'P':
        options.place_in_order = true;
        break;
      case 'M':
        options.multiple_sharing = true;
        break;
      case 'h':
        usage(stdout);
        std::exit(0);
      default:
        usage(stderr);
        return std::nullopt;
    }
  }
  if (optind != argc || options.nodes_path.empty() || options.tasks_path.empty()) {
    std::fputs("egpu-clustersim: --nodes and --tasks are needed, and nothing else\n", stderr);
    usage(stderr);
    return std::nullopt;
  }
  return options;
}

struct PolicyResult {
  std::vector<std::optional<InflationRun>> runs;  // by seed - 1
  std::vector<GpusNeeded> needed;                 // by node order - 1
};

double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values)
    sum += v;
  return values.empty() ? 0 : sum / static_cast<double>(values.size());
}

nlohmann::json share_json(const ShareOutcome& outcome) {
  return {{"tasks", outcome.tasks},
          {"mean_achieved_over_asked", outcome.mean_ratio},
          {"min_achieved_over_asked", outcome.min_ratio},
          {"pct_below_95pct_of_asked", outcome.below_95_pct}};
}

int run(const Options& options) {
  const auto started = std::chrono::steady_clock::now();
  auto nodes = load_openb_nodes(options.nodes_path);
  if (!nodes) {
    std::fprintf(stderr, "egpu-clustersim: %s\n", nodes.error().c_str());
    return 1;
  }
  auto tasks = load_openb_tasks(options.tasks_path);
  if (!tasks) {
    std::fprintf(stderr, "egpu-clustersim: %s\n", tasks.error().c_str());
    return 1;
  }
  uint64_t cluster_gpus = 0;
  for (const NodeSpec& node : *nodes)
    cluster_gpus += node.gpus;
  const bool any_gpu_task =
      std::any_of(tasks->begin(), tasks->end(), [](const TaskSpec& task) { return task.gpus > 0; });
  if (cluster_gpus == 0 || !any_gpu_task) {
    std::fprintf(stderr, "egpu-clustersim: %s\n",
                 cluster_gpus == 0 ? (options.nodes_path + ": no node has a GPU").c_str()
                                   : (options.tasks_path + ": no task asks for a GPU").c_str());
    return 1;
  }
  std::optional<egpu::config::EgpuConfig> egpu;
  if (options.granularity == Granularity::kSlurm) {
    if (options.config_path.empty()) {
      egpu.emplace();
    } else {
      auto loaded = egpu::config::load_egpu_config(options.config_path);
      if (!loaded) {
        std::fprintf(stderr, "egpu-clustersim: %s\n", loaded.error().c_str());
        return 1;
      }
      egpu = std::move(*loaded);
    }
  }
  std::vector<Demand> workload;
  for (const TaskSpec& task : *tasks)
    workload.push_back(to_demand(task, options.granularity));
  const FragmentationMeasure measure(workload, options.fgd_popularity);
  SimulationSetup setup{*nodes,
                        *tasks,
                        options.granularity,
                        egpu ? &*egpu : nullptr,
                        &measure,
                        options.multiple_sharing};
  if (options.place_in_order) {
    const auto placed = place_in_order(setup, options.policies.front());
    std::cout << "task,node,gpus\n";
    for (std::size_t i = 0; i < placed.size(); ++i) {
      std::cout << (*tasks)[i].name << ',';
      if (!placed[i]) {
        std::cout << "-,-\n";
        continue;
      }
      std::cout << (*nodes)[placed[i]->node].name << ',';
      for (std::size_t g = 0; g < placed[i]->gpus.size(); ++g) {
        std::cout << (g ? " " : "") << placed[i]->gpus[g];
        // A split share: each GPU's part, in thousandths.
        if (!placed[i]->split.empty()) std::cout << ':' << placed[i]->split[g];
      }
      std::cout << '\n';
    }
    return 0;
  }

  // Jobs (policy, seed or the needed search) shared out to threads; each
  // writes only its own slot, so the figures do not depend on the threads.
  std::vector<PolicyResult> results(options.policies.size());
  for (auto& result : results) {
    result.runs.resize(static_cast<std::size_t>(options.seeds));
    result.needed.resize(static_cast<std::size_t>(options.node_orders));
  }
  struct Job {
    std::size_t policy;
    int seed;  // > 0: an inflation run; < 0: the GPUs-needed search on node order -seed
  };
  std::vector<Job> jobs;
  for (std::size_t p = 0; p < options.policies.size(); ++p) {
    for (int order = 1; order <= options.node_orders; ++order)
      jobs.push_back({p, -order});
    for (int seed = 1; seed <= options.seeds; ++seed)
      jobs.push_back({p, seed});
  }
  std::mutex mutex;
  std::size_t next = 0;
  std::exception_ptr failure;  // the first job that threw; rethrown after the join
  auto worker = [&] {
    for (;;) {
      Job job{};
      {
        std::lock_guard lock(mutex);
        if (next == jobs.size() || failure) return;
        job = jobs[next++];
      }
      try {
        const Policy policy = options.policies[job.policy];
        if (job.seed < 0) {
          results[job.policy].needed[static_cast<std::size_t>(-job.seed - 1)] =
              gpus_needed(setup, policy, static_cast<uint64_t>(-job.seed));
        } else {
          results[job.policy].runs[static_cast<std::size_t>(job.seed - 1)].emplace(
              run_inflation(setup, policy, static_cast<uint64_t>(job.seed)));
        }
      } catch (...) {
        std::lock_guard lock(mutex);
        if (!failure) failure = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < options.threads; ++i)
    threads.emplace_back(worker);
  for (auto& thread : threads)
    thread.join();
  if (failure) std::rethrow_exception(failure);

  nlohmann::json out;
  uint64_t gpus = 0;
  for (const NodeSpec& node : *nodes)
    gpus += node.gpus;
  out["trace"] = {{"nodes", nodes->size()},
                  {"gpus", gpus},
                  {"tasks", tasks->size()},
                  {"granularity", options.granularity == Granularity::kSlurm ? "slurm" : "trace"},
                  {"seeds", options.seeds},
                  {"fgd_popularity_pct", options.fgd_popularity},
                  {"fgd_task_kinds", measure.kinds()},
                  {"multiple_sharing", options.multiple_sharing}};
  std::ofstream curves;
  if (!options.curves_path.empty()) {
    curves.open(options.curves_path);
    if (!curves) {
      std::fprintf(stderr, "egpu-clustersim: cannot write %s\n", options.curves_path.c_str());
      return 1;
    }
    curves << "policy,arrived_pct,allocated_pct,placed_pct\n";
  }
  for (std::size_t p = 0; p < options.policies.size(); ++p) {
    const std::string name(policy_name(options.policies[p]));
    const PolicyResult& result = results[p];
    std::vector<double> unallocated, dropped, refusals, split;
    for (const auto& run : result.runs) {
      unallocated.push_back(100.0 - run->allocated_pct.back());
      dropped.push_back(100.0 * static_cast<double>(run->tasks_dropped) /
                        static_cast<double>(run->tasks_arrived));
      refusals.push_back(static_cast<double>(run->agent_refusals));
      split.push_back(static_cast<double>(run->tasks_split));
    }
    nlohmann::json entry = {{"unallocated_pct_at_full_load", mean(unallocated)},
                            {"unallocated_pct_at_full_load_per_seed", unallocated},
                            {"tasks_dropped_pct", mean(dropped)},
                            {"agent_refusals", mean(refusals)},
                            {"tasks_split", mean(split)}};
    if (!result.needed.empty()) {
      std::vector<double> gpus_list;
      for (const GpusNeeded& needed : result.needed)
        gpus_list.push_back(static_cast<double>(needed.gpus));
      const bool all_found = std::all_of(result.needed.begin(), result.needed.end(),
                                         [](const GpusNeeded& n) { return n.gpus > 0; });
      entry["gpus_needed"] = all_found ? nlohmann::json(mean(gpus_list)) : nlohmann::json(nullptr);
      entry["gpus_needed_per_node_order"] = gpus_list;
    }
    out["policies"][name] = entry;
    if (curves.is_open()) {
      for (std::size_t percent = 0; percent <= 100; ++percent) {
        std::vector<double> allocated, placed;
        for (const auto& run : result.runs) {
          allocated.push_back(run->allocated_pct[percent]);
          placed.push_back(run->placed_pct[percent]);
        }
        curves << name << ',' << percent << ',' << mean(allocated) << ',' << mean(placed) << '\n';
      }
    }
  }
  // LS beside BE on the GPUs egpu fills today (first fit, seed 1), under FAA.
  for (std::size_t p = 0; p < options.policies.size(); ++p) {
    if (options.policies[p] != Policy::kSlurmFirstFit || results[p].runs.empty()) continue;
    const ColocationShares shares = colocation_shares(results[p].runs.front()->final_state);
    out["colocation_first_fit"] = {{"gpus_with_ls_and_be", shares.gpus},
                                   {"ls_faa", share_json(shares.ls_faa)},
                                   {"ls_time_slicing", share_json(shares.ls_time_slicing)},
                                   {"be_faa", share_json(shares.be_faa)},
                                   {"be_time_slicing", share_json(shares.be_time_slicing)}};
  }
  out["wall_s"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cout << out.dump(2) << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const auto options = parse(argc, argv);
  if (!options) return 2;
  try {
    return run(*options);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "egpu-clustersim: %s\n", error.what());
    return 1;
  }
}
