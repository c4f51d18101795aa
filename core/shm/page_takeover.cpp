#include "core/shm/page_takeover.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "core/protocol/messages.h"
#include "core/shm/pages.h"
#include "core/util/unique_fd.h"

namespace egpu::shm {

Status check_page_takeover(const std::string& runtime_dir, uint32_t max_slots) {
  // Instance pages live as long as their instances (removal unlinks them).
  std::error_code ec;
  bool instances = false;
  for (const auto& entry : std::filesystem::directory_iterator(runtime_dir, ec)) {
    if (entry.path().filename().string().starts_with("instance-")) {
      instances = true;
      break;
    }
  }
  if (!instances) return {};
  std::string problems;
  auto problem = [&](const std::string& text) {
    problems += (problems.empty() ? "" : "; ") + text;
  };
  for (uint32_t gpu = 0; gpu < protocol::kMaxGpus; ++gpu) {
    const std::string path = runtime_dir + "/gpu" + std::to_string(gpu);
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd.valid()) {
      if (errno != ENOENT) problem(path + ": " + std::strerror(errno));
      continue;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
      problem(path + " is not a regular file");
      continue;
    }
    if (static_cast<size_t>(st.st_size) != sizeof(GpuPage)) {
      problem(path + " has " + std::to_string(st.st_size) + " bytes, this agent's pages " +
              std::to_string(sizeof(GpuPage)) + " (another page layout)");
      continue;
    }
    uint32_t head[4] = {0, 0, 0, 0};  // magic, version, gpu_index, max_slots
    static_assert(offsetof(GpuPage, magic) == 0 && offsetof(GpuPage, version) == 4 &&
                  offsetof(GpuPage, gpu_index) == 8 && offsetof(GpuPage, max_slots) == 12);
    if (::pread(fd.get(), head, sizeof head, 0) != static_cast<ssize_t>(sizeof head)) {
      problem(path + ": cannot read its header");
      continue;
    }
    if (head[0] == 0) continue;  // never finished: nothing to take over
    if (head[0] != kGpuPageMagic) {
      problem(path + " is not a GPU page");
    } else if (head[1] != kLayoutVersion) {
      problem(path + " has page layout " + std::to_string(head[1]) + ", this agent's is " +
              std::to_string(kLayoutVersion));
    } else if (head[2] != gpu || head[3] > max_slots) {  // fewer slots: the rest are free
      problem(path + " is GPU " + std::to_string(head[2]) + " with " + std::to_string(head[3]) +
              " slots; this agent's is GPU " + std::to_string(gpu) + " with " +
              std::to_string(max_slots) + " (MaxInstancesPerGpu)");
    }
  }
  if (problems.empty()) return {};
  return Error{problems};
}

}  // namespace egpu::shm
