// StepCheckpoints: while a step runs on this node, what its instances have
// achieved so far goes into the job's AdminComment every interval, as
// running=1 records (core/accounting/step_record.h) that the step's final
// record replaces. A step the job's end cuts short (scancel, a time limit,
// preemption, a node failure, a step left running when the batch script
// exits) cannot write its final record: slurmctld refuses updates to a
// finished job. Its last checkpoint then stands, so sacct still shows what
// it did, up to one interval short.
//
// A thread of slurmstepd. It touches no SPANK handle (they are not thread
// safe) and holds no lock a task forked meanwhile needs (it spawns scontrol
// with posix_spawn; Slurm's log lock has atfork handlers).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace egpu::spank {

struct CheckpointTarget {
  uint64_t job_id = 0;
  uint32_t step_id = 0;
  std::string job_ref;  // as scontrol names the job (step_records.h)
  std::string node;
  std::string socket_path;  // the node agent's
  // scontrol's environment (scontrol_env()), read when the thread starts:
  // the thread must not read slurmstepd's while another thread changes it.
  std::vector<std::string> env;
};

class StepCheckpoints {
 public:
  using Log = std::function<void(const std::string&)>;
  // Starts the thread; the first checkpoint is one interval from now.
  StepCheckpoints(CheckpointTarget target, std::chrono::milliseconds interval, int timeout_ms,
                  Log log);
  // Stops the thread and waits for it: a checkpoint under way finishes
  // first (scontrol is bounded by timeout_ms), so none comes after the
  // step's final record (which a checkpoint could not replace anyway:
  // core/accounting/admin_comment.h).
  ~StepCheckpoints();
  StepCheckpoints(const StepCheckpoints&) = delete;
  StepCheckpoints& operator=(const StepCheckpoints&) = delete;

 private:
  void run();

  const CheckpointTarget target_;
  const std::chrono::milliseconds interval_;
  const int timeout_ms_;
  const Log log_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// One checkpoint now: asks the agent for the step's usage so far and writes
// it. "" when written, or when the step has no instances left here (it is
// ending); else what went wrong.
std::string checkpoint_step(const CheckpointTarget& target, int timeout_ms);

}  // namespace egpu::spank
