#include "nodeagent/user_sockets.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <memory>
#include <string_view>
#include <utility>

#include "core/protocol/control_client.h"
#include "core/util/log.h"

namespace egpu::agent {

UserSockets::UserSockets(event_base* base, std::string public_path, ControlServer::Handler handler)
    : base_(base), public_path_(std::move(public_path)), handler_(std::move(handler)) {}

void UserSockets::sync(const std::set<uid_t>& owners) {
  std::erase_if(servers_, [&](const auto& entry) { return !owners.contains(entry.first); });
  std::erase_if(failed_, [&](uid_t uid) { return !owners.contains(uid); });
  for (const uid_t uid : owners) {
    if (uid == 0 || servers_.contains(uid)) continue;
    ControlLimits limits;
    limits.max_connections = kConnectionsPerUser;
    limits.root_reserved = 0;  // root has a socket of its own
    limits.per_uid = kConnectionsPerUser;
    limits.only_uid = uid;
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
  const size_t slash = public_path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : public_path.substr(0, slash + 1);
  const std::string prefix =
      (slash == std::string::npos ? public_path : public_path.substr(slash + 1)) + ".u";
  const std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (!d) return;
  while (const dirent* e = readdir(d.get())) {
    const std::string_view name(e->d_name);
    if (!name.starts_with(prefix)) continue;
    const std::string_view digits = name.substr(prefix.size());
    uid_t uid = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), uid);
    if (digits.empty() || ec != std::errc{} || end != digits.data() + digits.size()) continue;
    const std::string path = dir + std::string(name);
    struct stat st {};
    if (::lstat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
  }
}

std::set<uid_t> UserSockets::users() const {
  std::set<uid_t> out;
  for (const auto& [uid, server] : servers_)
    out.insert(uid);
  return out;
}

}  // namespace egpu::agent
