// RAII ownership of a page file and its mapping. The agent creates pages in its
// runtime directory and passes descriptors to shims; shims map what they get.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <utility>

#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::shm {

class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, size_t size) : addr_(addr), size_(size) {}
  Mapping(Mapping&& o) noexcept : addr_(std::exchange(o.addr_, nullptr)), size_(o.size_) {}
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();

  void* get() const { return addr_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(addr_);
  }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

enum class Access { kReadOnly, kReadWrite };

// Maps `size` bytes of fd; checks the file is at least that large (a truncated
// page would SIGBUS the reader).
Result<Mapping> map_fd(int fd, size_t size, Access access);

// Creates or reopens a page file of `size` bytes at `path`, owned by uid:gid
// with `mode`. `created` tells whether it is new (zero-filled). An existing
// file of another size is replaced by a new one, never resized: processes
// that map it keep what they map. A file a user (not root) owns is neither
// changed nor replaced: the error's code is EBUSY where it is not what it
// should be (another size or owner, or a lease on it), and the caller moves
// it out of the way (its lock may be held: see nodeagent/page_chores.h).
struct PageFile {
  UniqueFd fd;
  Mapping mapping;
  bool created = false;
};
Result<PageFile> open_page_file(const std::string& path, size_t size, uid_t uid, gid_t gid,
                                mode_t mode);

// A new page file at `path` in place of whatever is there (unlinked: those
// who map the old one keep it, unchanged).
Result<PageFile> replace_page_file(const std::string& path, size_t size, uid_t uid, gid_t gid,
                                   mode_t mode);

}  // namespace egpu::shm
