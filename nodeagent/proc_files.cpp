#include "nodeagent/proc_files.h"

#include <fcntl.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <string>

#include "core/util/unique_fd.h"

namespace egpu::agent {
namespace {

constexpr std::string_view kDeleted = " (deleted)";

// The first number of a "Key:\tvalue ..." line of /proc/PID/status.
template <typename T>
bool field_value(std::string_view text, std::string_view key, T* out) {
  size_t at = text.starts_with(key) ? 0 : text.find("\n" + std::string(key));
  if (at == std::string_view::npos) return false;
  at += (at == 0 ? 0 : 1) + key.size();
  while (at < text.size() && (text[at] == '\t' || text[at] == ' '))
    ++at;
  return std::from_chars(text.data() + at, text.data() + text.size(), *out).ec == std::errc{};
}

}  // namespace

std::string_view without_deleted(std::string_view path) {
  if (path.ends_with(kDeleted)) path.remove_suffix(kDeleted.size());
  return path;
}

std::string read_proc_file(pid_t pid, const char* name) {
  std::string out;
  const std::string path = "/proc/" + std::to_string(pid) + "/" + name;
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return out;
  char buffer[4096];
  ssize_t n = 0;
  while ((n = ::read(fd.get(), buffer, sizeof buffer)) > 0)
    out.append(buffer, static_cast<size_t>(n));
  return out;
}

std::optional<ProcStatus> read_proc_status(pid_t pid) {
  if (pid <= 0) return std::nullopt;
  // Name: comes first; a newline in it is escaped by the kernel, so a
  // process cannot plant a line of its own.
  const std::string text = read_proc_file(pid, "status");
  ProcStatus s;
  if (!field_value(text, "Uid:", &s.uid)) return std::nullopt;
  field_value(text, "PPid:", &s.ppid);
  if (const size_t at = text.find("\nState:"); at != std::string::npos) {
    const size_t end = text.find('\n', at + 1);
    s.zombie = text.substr(at, end - at).find('Z') != std::string::npos;
  }
  return s;
}

uint64_t process_start_time(pid_t pid) {
  if (pid <= 0) return 0;
  // Field 22, counted from the command's closing ')' (field 2), which is the
  // file's last: the command may hold spaces, parentheses and newlines.
  const std::string text = read_proc_file(pid, "stat");
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  size_t at = close + 1;
  for (int field = 3; field <= 22; ++field) {
    while (at < text.size() && text[at] == ' ')
      ++at;
    if (field == 22) break;
    at = text.find(' ', at);
    if (at == std::string::npos) return 0;
  }
  uint64_t value = 0;
  if (std::from_chars(text.data() + at, text.data() + text.size(), value).ec != std::errc{})
    return 0;
  return value;
}

std::optional<MappedFile> parse_maps_line(const std::string& line) {
  unsigned major = 0;
  unsigned minor = 0;
  unsigned long long inode = 0;
  int path_at = -1;
  if (std::sscanf(line.c_str(), "%*s %*s %*s %x:%x %llu %n", &major, &minor, &inode, &path_at) <
          3 ||
      inode == 0) {
    return std::nullopt;
  }
  MappedFile f;
  f.dev = makedev(major, minor);
  f.ino = static_cast<ino_t>(inode);
  if (path_at > 0 && static_cast<size_t>(path_at) <= line.size())
    f.path = std::string_view(line).substr(static_cast<size_t>(path_at));
  f.path = without_deleted(f.path);
  return f;
}

}  // namespace egpu::agent
