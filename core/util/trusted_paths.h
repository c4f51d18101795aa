// Paths a root daemon creates files at, kept out of other users' reach.
// The agent binds its sockets and keeps its pages by path: a user who
// can rename or replace any directory on the way could swap in a symlink
// between the agent's bind and its chmod, and have root chmod /etc/shadow.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "core/util/result.h"

namespace egpu {

// OK when every directory from / down to `dir` (as given, and with its
// symlinks resolved; a symlink on the way must be root's or `owner`'s) is
// owned by root or `owner` and writable by no
// other user: not by others, by its group only when that group is root's.
// A sticky directory (/tmp) may be writable by all: nobody but its owner and
// root can then rename or remove what the agent made there. Otherwise an
// error naming the directory, its owner and mode.
Status check_trusted_directory(const std::string& dir, uid_t owner);

// chmod of the socket this process just bound at `path`, which follows no
// symlink and changes nothing but a socket of this process's user: whatever
// else is found there is an error and keeps its mode. With `owner`, the
// socket is then given to that user (after the mode: never open to others).
Status set_socket_mode(const std::string& path, mode_t mode,
                       std::optional<uid_t> owner = std::nullopt);

}  // namespace egpu
