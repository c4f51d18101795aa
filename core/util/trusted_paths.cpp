#include "core/util/trusted_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/util/unique_fd.h"

namespace egpu {
namespace {

std::string mode_text(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

Status check_one(const std::string& path, uid_t owner) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    return Error{"cannot check " + path + ": " + std::strerror(errno)};
  }
  if (!S_ISDIR(st.st_mode)) return Error{path + " is not a directory"};
  const bool owned = st.st_uid == 0 || st.st_uid == owner;
  const bool sticky = (st.st_mode & S_ISVTX) != 0;
  const bool others_write = (st.st_mode & S_IWOTH) != 0;
  const bool group_write = (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0;
  if (owned && (sticky || (!others_write && !group_write))) return {};
  return Error{path + " (owner uid " + std::to_string(st.st_uid) + ", group " +
               std::to_string(st.st_gid) + ", mode " + mode_text(st.st_mode) +
               ") can be changed by another user, who could replace what root makes in it"};
}

// "/", each directory on the way, and the absolute `path` itself.
std::vector<std::string> prefixes(const std::string& path) {
  std::vector<std::string> out{"/"};
  for (size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1))
    out.push_back(path.substr(0, slash));
  if (path != "/" && path.back() != '/') out.push_back(path);
  return out;
}

}  // namespace

Status check_trusted_directory(const std::string& dir, uid_t owner) {
  // The path as given first: the agent creates by it, so a symlink on the
  // way must be one nobody else may replace (its directory is checked the
  // step before); then every directory it leads through.
  if (!dir.empty() && dir.front() == '/') {
    for (const std::string& prefix : prefixes(dir)) {
      struct stat st {};
      if (::lstat(prefix.c_str(), &st) != 0) continue;  // realpath below says why
      if (!S_ISLNK(st.st_mode)) {
        if (Status s = check_one(prefix, owner); !s) return s;
      } else if (st.st_uid != 0 && st.st_uid != owner) {
        return Error{prefix + " is a symlink of uid " + std::to_string(st.st_uid) +
                     ", who could point it elsewhere"};
      }
    }
  }
  char resolved[PATH_MAX];
  if (::realpath(dir.c_str(), resolved) == nullptr) {
    return Error{"cannot resolve " + dir + ": " + std::strerror(errno)};
  }
  for (const std::string& prefix : prefixes(resolved)) {
    if (Status s = check_one(prefix, owner); !s) return s;
  }
  return {};
}

Status set_socket_mode(const std::string& path, mode_t mode, std::optional<uid_t> owner) {
  // O_PATH pins what is at the path now; the mode is set on that inode
  // through /proc, as glibc's fchmodat(AT_SYMLINK_NOFOLLOW) does.
  UniqueFd at(::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
  if (!at.valid()) return Error{"chmod " + path + ": " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(at.get(), &st) != 0) return Error{"chmod " + path + ": " + std::strerror(errno)};
  if (!S_ISSOCK(st.st_mode) || st.st_uid != ::geteuid()) {
    return Error{"chmod " + path + ": it is no longer the socket this process bound there"};
  }
  const std::string self = "/proc/self/fd/" + std::to_string(at.get());
  if (::chmod(self.c_str(), mode) != 0) {
    return Error{"chmod " + path + ": " + std::strerror(errno)};
  }
  if (owner && ::fchownat(at.get(), "", *owner, static_cast<gid_t>(-1), AT_EMPTY_PATH) != 0) {
    return Error{"chown " + path + ": " + std::strerror(errno)};
  }
  return {};
}

}  // namespace egpu
