// StepRecord: one line of what a step achieved on one GPU of one node, as it
// stands in the job's AdminComment, where `sacct -o AdminComment` shows it
// after the job ended:
//
//   egpu step=42.0 node=n1 gpu=0 units=30 elapsed_s=61.204 device_s=18.113
//        share=0.296 mem_peak_mib=1024 throttled_s=4.870
//
// (one line; agent_restarts=N and partial=1 follow when they apply, and
// running=1 on a checkpoint: what a step that was still running had achieved
// when it was written, which the step's final record replaces). Records
// are separated by "; " (admin_comment.h). The grammar is strict so that
// job_submit/egpu can tell its records from an admin's own text and refuse
// anything else.
#pragma once

#include <compare>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/accounting/step_usage.h"
#include "core/util/result.h"

namespace egpu::accounting {

struct StepRecord {
  uint64_t job_id = 0;
  uint32_t step_id = 0;  // Slurm's, special steps included (protocol::kStepBatch...)
  std::string node;      // the Slurm node name
  StepUsage usage;
  // A checkpoint of a running step (usage so far): it stands as the step's
  // record only when the job ended before the step could write its final one.
  bool running = false;
};

std::string format_step_record(const StepRecord& record);

// What identifies a record: a later record with the same key replaces it.
struct RecordKey {
  std::string step;  // "42.0", "42.batch"
  std::string node;
  uint32_t gpu = 0;
  auto operator<=>(const RecordKey&) const = default;
};

// The key of a record in the grammar above; an error names what is wrong.
// `fields`, when given, gets every key=value of it in order.
Result<RecordKey> parse_step_record(
    std::string_view text, std::vector<std::pair<std::string, std::string>>* fields = nullptr);

// Whether a record in the grammar above is a checkpoint (running=1); false
// for a final record and for anything that is not a record.
bool is_running_record(std::string_view text);

// A node name fit for a record (Slurm node names; no spaces or separators).
bool valid_node_name(std::string_view name);

}  // namespace egpu::accounting
