#include "nodeagent/user_sockets.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <memory>
#include <string_view>
#include <utility>

#include "core/protocol/control_client.h"
#include "core/util/log.h"
#include "core/util/trusted_paths.h"

namespace egpu::agent {

UserSockets::UserSockets(event_base* base, std::string public_path, ControlServer::Handler handler,
                         std::shared_ptr<RequestBudget> budget)
    : base_(base),
      public_path_(std::move(public_path)),
      handler_(std::move(handler)),
      budget_(std::move(budget)) {}

bool UserSockets::ensure_dir() {
  if (dir_ready_) return true;
  const std::string dir = protocol::user_socket_dir(public_path_);
  std::string why;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    why = "mkdir " + dir + ": " + std::strerror(errno);
  } else {
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      why = dir + " is not a directory";
    } else if (Status s = check_trusted_directory(dir, ::geteuid()); !s) {
      why = s.error();
    } else if ((st.st_mode & 07777) != 0755 && ::chmod(dir.c_str(), 0755) != 0) {
      // Root's: made under a umask that left users unable to reach it.
      why = "chmod " + dir + ": " + std::strerror(errno);
    }
  }
  if (why.empty()) return dir_ready_ = true;
  if (!dir_failure_logged_) {
    dir_failure_logged_ = true;
    EGPU_LOG_WARN("no user has a socket of its own (%s): all use %s", why.c_str(),
                  public_path_.c_str());
  }
  return false;
}

void UserSockets::sync(const std::set<uid_t>& owners) {
  std::erase_if(servers_, [&](const auto& entry) { return !owners.contains(entry.first); });
  std::erase_if(failed_, [&](uid_t uid) { return !owners.contains(uid); });
  if (!ensure_dir()) return;
  for (const uid_t uid : owners) {
    if (uid == 0 || servers_.contains(uid)) continue;
    ControlLimits limits;
    limits.max_connections = kConnectionsPerUser;
    limits.root_reserved = 0;  // root has a socket of its own
    limits.per_uid = kConnectionsPerUser;
    limits.only_uid = uid;
    limits.request_budget = budget_;
    const std::string path = protocol::user_socket_path(public_path_, uid);
    auto server = ControlServer::listen(base_, path, handler_, limits, 0600, uid);
    if (!server) {
      if (failed_.insert(uid).second) {
        EGPU_LOG_WARN("no socket of its own for uid %u (%s): its clients use %s",
                      static_cast<unsigned>(uid), server.error().c_str(), public_path_.c_str());
      }
      continue;
    }
    failed_.erase(uid);
    servers_.emplace(uid, std::move(*server));
  }
}

void UserSockets::remove_left(const std::string& public_path) {
  const std::string dir = protocol::user_socket_dir(public_path);
  const std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return;
  while (const dirent* e = readdir(d.get())) {
    const std::string_view name(e->d_name);
    uid_t uid = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), uid);
    if (name.empty() || ec != std::errc{} || end != name.data() + name.size()) continue;
    const std::string path = dir + "/" + std::string(name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
  }
}

}  // namespace egpu::agent
