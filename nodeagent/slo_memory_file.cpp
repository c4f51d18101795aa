#include "nodeagent/slo_memory_file.h"

#include <cmath>

#include "nodeagent/state_file.h"

namespace egpu::agent {
namespace {

// What a restart uses of `memory` (see save()).
slo::SloMemory restorable(slo::SloMemory memory) {
  for (auto& [id, m] : memory.instances) {
    m.window.clear();
    for (double& u : m.used)
      u = std::round(u * 1e4) / 1e4;
  }
  return memory;
}

}  // namespace

std::string SloMemoryFile::path(const std::string& runtime_dir, uint32_t gpu) {
  return runtime_dir + "/latency-gpu" + std::to_string(gpu) + ".json";
}

Result<std::optional<slo::SloMemory>> SloMemoryFile::load(const std::string& runtime_dir,
                                                          uint32_t gpu) {
  const std::string file = path(runtime_dir, gpu);
  auto text = read_state_file(file, kMaxBytes);
  if (!text) return Error{text.error()};
  if (!*text) return std::optional<slo::SloMemory>{};
  auto memory = slo::decode_slo_memory(**text);
  if (!memory) {
    set_aside(runtime_dir, gpu);
    return Error{file + ": " + memory.error() + " (set aside as .bad)"};
  }
  return std::optional<slo::SloMemory>(std::move(*memory));
}

Status SloMemoryFile::save(const std::string& runtime_dir, uint32_t gpu,
                           const slo::SloMemory& memory) {
  return write_state_file(path(runtime_dir, gpu), slo::encode_slo_memory(restorable(memory)));
}

Status SloMemoryFile::remove(const std::string& runtime_dir, uint32_t gpu) {
  return remove_state_file(path(runtime_dir, gpu));
}

void SloMemoryFile::set_aside(const std::string& runtime_dir, uint32_t gpu) {
  set_aside_state_file(path(runtime_dir, gpu));
}

}  // namespace egpu::agent
