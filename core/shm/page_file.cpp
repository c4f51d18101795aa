#include "core/shm/page_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace egpu::shm {
namespace {

std::string errno_text(const std::string& what) {
  return what + ": " + std::strerror(errno);
}

}  // namespace

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    if (addr_ != nullptr) ::munmap(addr_, size_);
    addr_ = std::exchange(o.addr_, nullptr);
    size_ = o.size_;
  }
  return *this;
}

Mapping::~Mapping() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

Result<Mapping> map_fd(int fd, size_t size, Access access) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error{errno_text("fstat of a page")};
  if (!S_ISREG(st.st_mode)) return Error{"page descriptor is not a regular file"};
  if (static_cast<size_t>(st.st_size) < size) {
    return Error{"page file has " + std::to_string(st.st_size) + " bytes, expected " +
                 std::to_string(size)};
  }
  const int prot = access == Access::kReadOnly ? PROT_READ : PROT_READ | PROT_WRITE;
  void* addr = ::mmap(nullptr, size, prot, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED) return Error{errno_text("mmap of a page")};
  return Mapping(addr, size);
}

namespace {

Error users_page(const std::string& path) {
  return Error{path + " is a page its user owns and cannot be repaired or replaced in place",
               EBUSY};
}

// `may_replace`: an existing file of the wrong size is replaced (once).
Result<PageFile> open_page(const std::string& path, size_t size, uid_t uid, gid_t gid, mode_t mode,
                           bool may_replace) {
  PageFile page;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
  if (fd >= 0) {
    page.created = true;
  } else if (errno == EEXIST) {
    // O_NONBLOCK: the file's owner (a job, for its instance page) may hold
    // a lease on it, which would block this open for lease-break-time (45 s)
    // per page; a leased page is replaced like a damaged one.
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0 && errno == EWOULDBLOCK) {
      struct stat st {};
      if (::lstat(path.c_str(), &st) == 0 && st.st_uid != 0) return users_page(path);
      if (may_replace) return replace_page_file(path, size, uid, gid, mode);
    }
    if (fd < 0) return Error{errno_text("open " + path)};
  } else {
    const int err = errno;
    return Error{errno_text("create " + path), err};
  }
  page.fd.reset(fd);
  struct stat st {};
  if (::fstat(fd, &st) != 0) return Error{errno_text("fstat " + path)};
  if (!S_ISREG(st.st_mode)) return Error{path + " is not a regular file"};
  // A user's file is never changed here: each change takes the file's
  // lock, which its user can hold for as long as it likes (a write() into
  // the file from a buffer on a FUSE file that never answers), and so would
  // an unlink to replace it. Its mode and group are its user's to choose.
  const bool users = !page.created && st.st_uid != 0;
  if (users && (st.st_uid != uid || static_cast<size_t>(st.st_size) != size)) {
    page.fd.reset();
    return users_page(path);
  }
  if (!page.created && static_cast<size_t>(st.st_size) != size) {
    // Another layout's page (an upgrade) or a damaged one: start over in a
    // new file. Resizing this one would SIGBUS the processes that still map
    // it (shims of the previous agent) past its new end.
    page.fd.reset();
    if (!may_replace) return Error{path + " came back with the wrong size while being replaced"};
    return replace_page_file(path, size, uid, gid, mode);
  }
  // Its storage is taken now: a sparse page whose filesystem another job
  // filled would fault (SIGBUS) at its first write instead of failing here.
  if (page.created && ::fallocate(fd, 0, 0, static_cast<off_t>(size)) != 0 &&
      (errno != EOPNOTSUPP || ::ftruncate(fd, static_cast<off_t>(size)) != 0)) {
    const int err = errno;
    const Error error{errno_text("size " + path), err};
    ::unlink(path.c_str());  // still root's and empty: nothing to keep
    return error;
  }
  // Ownership and mode are enforced on every open, not only at creation;
  // each takes the file's lock, which its user can hold once it owns it:
  // only what differs is changed, and the mode before the owner.
  const auto fail = [&](const std::string& what) {
    const Error error{errno_text(what + " " + path)};
    if (page.created) ::unlink(path.c_str());  // still root's: nothing to keep
    return error;
  };
  if (!users && (st.st_mode & 07777) != mode && ::fchmod(fd, mode) != 0) return fail("chmod");
  if (!users && (st.st_uid != uid || st.st_gid != gid) && ::fchown(fd, uid, gid) != 0)
    return fail("chown");
  auto mapping = map_fd(fd, size, Access::kReadWrite);
  if (!mapping) return Error{path + ": " + mapping.error()};
  page.mapping = std::move(*mapping);
  return page;
}

}  // namespace

Result<PageFile> open_page_file(const std::string& path, size_t size, uid_t uid, gid_t gid,
                                mode_t mode) {
  return open_page(path, size, uid, gid, mode, true);
}

Result<PageFile> replace_page_file(const std::string& path, size_t size, uid_t uid, gid_t gid,
                                   mode_t mode) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) return Error{errno_text("unlink " + path)};
  auto page = open_page(path, size, uid, gid, mode, false);
  if (page && !page->created) return Error{path + " came back before it could be replaced"};
  return page;
}

}  // namespace egpu::shm
