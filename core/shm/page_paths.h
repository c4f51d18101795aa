// Where the agent keeps a GPU's pages in its runtime directory (pages.h):
// the GPU page shims map, and the record page only the agent reads.
#pragma once

#include <cstdint>
#include <string>

namespace egpu::shm {

inline std::string gpu_page_path(const std::string& runtime_dir, uint32_t gpu) {
  return runtime_dir + "/gpu" + std::to_string(gpu);
}

inline std::string gpu_record_page_path(const std::string& runtime_dir, uint32_t gpu) {
  return gpu_page_path(runtime_dir, gpu) + ".records";
}

}  // namespace egpu::shm
