// What the agent reads of other processes in /proc, parsed in one place:
// their status (real uid, parent, zombie), their start time (which, with the
// pid, names one process) and the lines of their maps. The texts are the
// kernel's, but a process chooses its own name, which may hold spaces,
// parentheses and (escaped or not) anything else, so every parser skips it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace egpu::agent {

// /proc/PID/NAME whole (they are small, and read() hands out what is
// there); empty when it cannot be read.
std::string read_proc_file(pid_t pid, const char* name);

struct ProcStatus {
  uid_t uid = 0;  // real: a process cannot change it without privileges
  pid_t ppid = 0;
  bool zombie = false;  // a leader that exited while other threads run on
};

// /proc/PID/status; nullopt when it cannot be read (gone).
std::optional<ProcStatus> read_proc_status(pid_t pid);

// /proc/PID/stat's starttime (0: unreadable).
uint64_t process_start_time(pid_t pid);

// One line of /proc/PID/maps that maps a file.
struct MappedFile {
  dev_t dev = 0;
  ino_t ino = 0;
  std::string_view path;  // without " (deleted)"; may be empty; points into the line
};

// `path` without the " (deleted)" the kernel appends to the name of a file
// unlinked since (in /proc/PID/fd links and maps lines).
std::string_view without_deleted(std::string_view path);

// "start-end perms offset major:minor inode [path]", numbers in hex but the
// inode, the path after the inode's spaces. nullopt for anonymous mappings
// and lines that are not of that form.
std::optional<MappedFile> parse_maps_line(const std::string& line);

}  // namespace egpu::agent
