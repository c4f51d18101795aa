// Text for people and for Slurm: a table of the node's GPUs and the gres.conf
// lines (Name=gpu Type= File= Cores= Links=) that describe them.
#ifndef EGPU_CORE_TOPO_TOPO_REPORT_H
#define EGPU_CORE_TOPO_TOPO_REPORT_H

#include <string>
#include <string_view>
#include <vector>

#include "core/topo/topology.h"

namespace egpu::topo {

// "NVIDIA H100 80GB HBM3" -> "h100", "Tesla V100-SXM2-32GB" -> "v100",
// "NVIDIA RTX A6000" -> "rtx_a6000": vendor/brand words dropped, words up to
// the first one with a digit kept, cut at the first '-', lower case, only
// [a-z0-9_] left; "gpu" when nothing is left.
std::string short_model_name(std::string_view model);

// "79.3 GiB", or "unknown" for 0.
std::string format_memory(uint64_t bytes);

// One header line, then one row per GPU: index, bus id, model, memory, Slurm
// cores, NUMA nodes, links to every GPU.
std::string format_gpu_table(const Topology& topology);

struct GresConfOptions {
  // Device file; the first "%d" becomes the GPU index (appended when absent).
  std::string file_pattern = "/dev/nvidia%d";
  // Cores= is the GPU's own locality (its NUMA node or group) by default. Slurm
  // wants whole sockets there unless SlurmdParameters=numa_node_as_socket;
  // true widens to every socket the GPU's cores are on.
  bool whole_sockets = false;
  bool with_type = true;  // Type=<short model>
};

// gres.conf Cores= for one GPU ("" when the locality is unknown).
std::string gres_cores(const Topology& topology, const Gpu& gpu, bool whole_sockets);

// "" when `links` is a valid Links= value for GPU `self` of `gpu_count` the way
// Slurm checks it (one entry per GPU, exactly one -1, values -2..1023), and the
// -1 sits at `self`; else what is wrong.
std::string validate_links(const std::vector<int>& links, size_t gpu_count, int self);

struct GresConf {
  std::vector<std::string> lines;  // one per GPU, no newline
  std::string error;               // "" unless a line would not pass validation
};
GresConf format_gres_conf(const Topology& topology, const GresConfOptions& options = {});

}  // namespace egpu::topo

#endif
