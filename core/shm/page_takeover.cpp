#include "core/shm/page_takeover.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "core/protocol/messages.h"
#include "core/shm/page_paths.h"
#include "core/shm/pages.h"
#include "core/util/unique_fd.h"

namespace egpu::shm {

namespace {

// The first four words of the page file at `path` (magic, version, gpu_index
// and, in a GPU page, max_slots), or an error naming why they cannot be
// trusted; nullopt when there is no file.
Result<std::optional<std::array<uint32_t, 4>>> read_head(const std::string& path, size_t size) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::array<uint32_t, 4>>{};
    return Error{path + ": " + std::strerror(errno)};
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return Error{path + " is not a regular file"};
  }
  if (static_cast<size_t>(st.st_size) != size) {
    return Error{path + " has " + std::to_string(st.st_size) + " bytes, this agent's pages " +
                 std::to_string(size) + " (another page layout)"};
  }
  std::array<uint32_t, 4> head{};
  static_assert(offsetof(GpuPage, magic) == 0 && offsetof(GpuPage, version) == 4 &&
                offsetof(GpuPage, gpu_index) == 8 && offsetof(GpuPage, max_slots) == 12);
  static_assert(offsetof(GpuRecordPage, magic) == 0 && offsetof(GpuRecordPage, version) == 4 &&
                offsetof(GpuRecordPage, gpu_index) == 8);
  if (::pread(fd.get(), head.data(), sizeof head, 0) != static_cast<ssize_t>(sizeof head)) {
    return Error{path + ": cannot read its header"};
  }
  return std::optional<std::array<uint32_t, 4>>{head};
}

}  // namespace

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
    const std::string path = gpu_page_path(runtime_dir, gpu);
    auto head = read_head(path, sizeof(GpuPage));
    if (!head) {
      problem(head.error());
      continue;
    }
    if (!*head || (**head)[0] == 0) continue;  // none, or never finished: nothing to take over
    const auto& h = **head;
    if (h[0] != kGpuPageMagic) {
      problem(path + " is not a GPU page");
    } else if (h[1] != kLayoutVersion) {
      problem(path + " has page layout " + std::to_string(h[1]) + ", this agent's is " +
              std::to_string(kLayoutVersion));
    } else if (h[2] != gpu || h[3] > max_slots) {  // fewer slots: the rest are free
      problem(path + " is GPU " + std::to_string(h[2]) + " with " + std::to_string(h[3]) +
              " slots; this agent's is GPU " + std::to_string(gpu) + " with " +
              std::to_string(max_slots) + " (MaxInstancesPerGpu)");
    } else {
      // The instances themselves are in the record page beside it.
      const std::string rpath = gpu_record_page_path(runtime_dir, gpu);
      auto rhead = read_head(rpath, sizeof(GpuRecordPage));
      if (!rhead) {
        problem(rhead.error());
      } else if (!*rhead) {
        problem(rpath + " is missing: the instances of " + path + " are not recorded");
      } else if ((**rhead)[0] != kGpuRecordPageMagic || (**rhead)[1] != kLayoutVersion ||
                 (**rhead)[2] != gpu) {
        problem(rpath + " is not GPU " + std::to_string(gpu) + "'s record page of layout " +
                std::to_string(kLayoutVersion));
      }
    }
  }
  if (problems.empty()) return {};
  return Error{problems};
}

}  // namespace egpu::shm
