#include "nodeagent/state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/util/unique_fd.h"

namespace egpu::agent {
namespace {

Error failed(const std::string& path, const char* what) {
  return Error{path + ": " + what + ": " + std::strerror(errno)};
}

}  // namespace

Result<std::optional<std::string>> read_state_file(const std::string& file, std::size_t max_bytes) {
  const auto bad = [&](const std::string& why) {
    set_aside_state_file(file);
    return Error{file + ": " + why + " (set aside as .bad)"};
  };
  UniqueFd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    if (errno == ENOENT) return std::optional<std::string>{};
    if (errno == ELOOP) return bad("a symbolic link");
    return failed(file, "cannot open");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return failed(file, "cannot stat");
  // Only the agent's own: a regular file of root's that nobody else may read or write.
  if (!S_ISREG(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 077) != 0)
    return bad("not a file this agent wrote (type, owner or mode)");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return bad("larger than " + std::to_string(max_bytes) + " bytes");
  std::string text(static_cast<std::size_t>(st.st_size), '\0');
  std::size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd.get(), text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failed(file, "cannot read");
    if (n == 0) break;
    got += static_cast<std::size_t>(n);
  }
  text.resize(got);
  return std::optional<std::string>(std::move(text));
}

Status write_state_file(const std::string& file, const std::string& text) {
  const std::string next = file + ".new";
  ::unlink(next.c_str());  // a previous agent's, cut short
  UniqueFd fd(::open(next.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd.valid()) return failed(next, "cannot create");
  std::size_t put = 0;
  while (put < text.size()) {
    const ssize_t n = ::write(fd.get(), text.data() + put, text.size() - put);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const Error e = failed(next, "cannot write");
      ::unlink(next.c_str());
      return e;
    }
    put += static_cast<std::size_t>(n);
  }
  // No fsync: the state is for an agent restart, not a machine's; after a
  // power loss the instances are gone too.
  fd.reset();
  if (::rename(next.c_str(), file.c_str()) != 0) {
    const Error e = failed(file, "cannot replace");
    ::unlink(next.c_str());
    return e;
  }
  return {};
}

Status remove_state_file(const std::string& file) {
  if (::unlink(file.c_str()) != 0 && errno != ENOENT) return failed(file, "cannot remove");
  return {};
}

void set_aside_state_file(const std::string& file) {
  if (::rename(file.c_str(), (file + ".bad").c_str()) != 0) ::unlink(file.c_str());
}

}  // namespace egpu::agent
