#include "core/topo/topo_report.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <set>

#include "core/topo/int_list.h"

namespace egpu::topo {
namespace {

std::vector<std::string_view> split_words(std::string_view text) {
  std::vector<std::string_view> words;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = text.find_first_not_of(' ', pos);
    if (start == std::string_view::npos) break;
    size_t end = text.find(' ', start);
    if (end == std::string_view::npos) end = text.size();
    words.push_back(text.substr(start, end - start));
    pos = end;
  }
  return words;
}

bool is_brand_word(std::string_view word) {
  constexpr std::array<std::string_view, 4> kBrands = {"NVIDIA", "Tesla", "GeForce", "Quadro"};
  return std::find(kBrands.begin(), kBrands.end(), word) != kBrands.end();
}

std::string file_for(const std::string& pattern, int index) {
  std::string file = pattern;
  size_t at = file.find("%d");
  if (at == std::string::npos) return file + std::to_string(index);
  return file.replace(at, 2, std::to_string(index));
}

// Left-aligned columns, two spaces apart, trailing blanks trimmed.
std::string format_columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out += line + '\n';
  }
  return out;
}

}  // namespace

std::string short_model_name(std::string_view model) {
  std::vector<std::string_view> words = split_words(model);
  auto first = std::find_if_not(words.begin(), words.end(), is_brand_word);
  std::string name;
  auto is_alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  for (auto it = first; it != words.end(); ++it) {
    if (!is_alnum(it->front())) break;  // "[10de:1eb8]" and the like: not a model word
    if (!name.empty()) name += '_';
    name += *it;
    if (std::any_of(it->begin(), it->end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      break;
    }
  }
  name = name.substr(0, name.find('-'));
  // Slurm type names: letters, digits and '_' only.
  std::erase_if(name, [&](char c) { return !is_alnum(c) && c != '_'; });
  for (char& c : name)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name.empty() ? "gpu" : name;
}

std::string format_memory(uint64_t bytes) {
  if (bytes == 0) return "unknown";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return text;
}

std::string format_gpu_table(const Topology& topology) {
  std::string out = topology.source + ": " + std::to_string(topology.gpus.size()) + " GPU(s), " +
                    std::to_string(topology.core_count) + " cores in " +
                    std::to_string(topology.socket_cores.size()) + " socket(s), NVLink " +
                    (topology.has_nvlink ? "matrix present" : "not known (links 0)") + "\n";
  std::vector<std::vector<std::string>> rows = {
      {"GPU", "BUS ID", "MODEL", "MEMORY", "CORES", "NUMA", "LINKS"}};
  for (const Gpu& gpu : topology.gpus) {
    rows.push_back({std::to_string(gpu.index), gpu.pci_bus_id, gpu.model,
                    format_memory(gpu.memory_bytes), format_ranged_list(gpu.cores),
                    format_ranged_list(gpu.numa_nodes), join_comma(gpu.links)});
  }
  return out + format_columns(rows);
}

std::string gres_cores(const Topology& topology, const Gpu& gpu, bool whole_sockets) {
  if (!whole_sockets) return format_ranged_list(gpu.cores);
  std::set<int> own(gpu.cores.begin(), gpu.cores.end());
  std::vector<int> widened;
  for (const std::vector<int>& socket : topology.socket_cores) {
    if (std::any_of(socket.begin(), socket.end(), [&](int core) { return own.count(core) > 0; })) {
      widened.insert(widened.end(), socket.begin(), socket.end());
    }
  }
  return format_ranged_list(widened);
}

std::string validate_links(const std::vector<int>& links, size_t gpu_count, int self) {
  if (links.size() != gpu_count) {
    return "Links has " + std::to_string(links.size()) + " values for " +
           std::to_string(gpu_count) + " GPUs";
  }
  int self_entries = 0;
  for (size_t i = 0; i < links.size(); ++i) {
    if (links[i] < -2 || links[i] > 1023) {
      return "Links value " + std::to_string(links[i]) + " is outside -2..1023";
    }
    if (links[i] == -1) {
      ++self_entries;
      if (static_cast<int>(i) != self) {
        return "Links has -1 at position " + std::to_string(i) + ", not at the GPU's own index " +
               std::to_string(self);
      }
    }
  }
  if (self_entries != 1) return "Links needs exactly one -1 (the GPU itself)";
  return "";
}

GresConf format_gres_conf(const Topology& topology, const GresConfOptions& options) {
  GresConf conf;
  for (const Gpu& gpu : topology.gpus) {
    std::string error = validate_links(gpu.links, topology.gpus.size(), gpu.index);
    if (!error.empty()) {
      conf.error = "GPU " + std::to_string(gpu.index) + ": " + error;
      conf.lines.clear();
      return conf;
    }
    std::string line = "Name=gpu";
    if (options.with_type) line += " Type=" + short_model_name(gpu.model);
    line += " File=" + file_for(options.file_pattern, gpu.index);
    std::string cores = gres_cores(topology, gpu, options.whole_sockets);
    if (!cores.empty()) line += " Cores=" + cores;
    line += " Links=" + join_comma(gpu.links);
    conf.lines.push_back(std::move(line));
  }
  return conf;
}

}  // namespace egpu::topo
