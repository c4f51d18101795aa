// ReportedSpawn: starts a command under a reporter, for run_processes
// (subprocess.h). The reporter is a copy of this process cloned with no exit
// signal; it starts the command, waits for it and writes how it ended into a
// pipe. A process that reaps any child of its own (slurmstepd's main thread
// sits in wait3(-1) while the SPANK checkpoint thread runs scontrol) would
// otherwise take the command's exit status, and an update that worked would
// read as failed: wait3 without __WALL skips children that send no SIGCHLD.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu {

struct ReportedChild {
  pid_t reporter = -1;  // a process group of its own, the command's too
  UniqueFd out, err;    // the command's stdout and stderr (non-blocking)
  UniqueFd report;      // the reporter's message (non-blocking; read_report)
};

// Starts argv (argv[0] looked up on the PATH of `envp`, else of this
// process) with stdin /dev/null, no other descriptor of this process, and
// signals at their defaults (those ignored stay ignored, SIGCHLD excepted).
// The reporter blocks SIGTERM, so a TERM to the group is the command's; a
// KILL ends both. Reap the reporter with waitpid(reporter, ..., __WALL).
Result<ReportedChild> spawn_reported(const std::vector<std::string>& argv, char* const* envp);

// How the command ended, once its reporter was reaped: its wait status, or
// why it could not start. Absent when the reporter died without saying
// (killed at the deadline): its own status is all there is.
struct Report {
  bool started = false;
  int wait_status = 0;  // when started
  int exec_errno = 0;   // when not
};
Result<Report> read_report(const UniqueFd& report);

}  // namespace egpu
