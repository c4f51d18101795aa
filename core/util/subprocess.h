// Child processes (egpuctl's Slurm relay, SPANK's accounting update): run several commands at once
// and collect what each wrote and how it ended, within one deadline.
#pragma once

#include <string>
#include <vector>

namespace egpu {

struct ProcessOutcome {
  int exit_code = -1;  // -1 unless it exited
  int signal = 0;      // the signal that ended it, if one did
  bool timed_out = false;
  std::string out;          // stdout, at most kMaxCapture bytes
  std::string err;          // stderr, likewise
  std::string spawn_error;  // set when it could not be started

  bool ok() const { return spawn_error.empty() && !timed_out && exit_code == 0; }
  // One line on why it did not succeed ("" when it did): its stderr's last
  // line, else how it ended.
  std::string failure() const;
};

inline constexpr size_t kMaxCapture = 4u << 20;

// Starts every command (argv[0] looked up on the PATH of `env`, else this
// process's; stdin /dev/null; no other descriptor of this process; each in a
// process group of its own, under a reporter: reported_spawn.h), waits for
// all, and returns their outcomes in order. `env`: the children's environment (nullptr: this
// process's). Past timeout_ms the groups still running get SIGTERM, and SIGKILL 3 s later (runuser
// and srun pass a TERM on to their own children first).
std::vector<ProcessOutcome> run_processes(const std::vector<std::vector<std::string>>& commands,
                                          int timeout_ms,
                                          const std::vector<std::string>* env = nullptr);

}  // namespace egpu
