// The job's AdminComment as the home of its steps' egpu records: SPANK asks
// slurmctld to append records (`scontrol update JobId=N
// AdminComment=egpu-append:REC; REC`), and job_submit/egpu turns that request
// into the merged comment under slurmctld's job lock, so steps ending at once
// on several nodes never overwrite each other (Slurm can only replace an
// AdminComment). Text that is not an egpu record (an admin's own) is kept as
// it was.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace egpu::accounting {

inline constexpr std::string_view kAppendPrefix = "egpu-append:";
inline constexpr std::string_view kSeparator = "; ";
// Slurm's database keeps AdminComment in a TEXT column (65,535 bytes).
inline constexpr size_t kMaxAdminComment = 60000;

// An AdminComment update asking to append egpu records.
bool is_append_request(std::string_view admin_comment);

// The request text for `records` (each from format_step_record).
std::string append_request(const std::vector<std::string>& records);

// The AdminComment after appending the records of `request` to `existing`:
// a record whose step, node and GPU are already there replaces that one (a
// retried update, or the final record after the step's checkpoints), except
// that a checkpoint (running=1) never replaces a final record; others go at
// the end. Records that would take the comment
// past `max_length` are left out and counted in an "egpu dropped=N" entry
// (checkpoints that do not fit are left out uncounted: the next would count
// again), except that a new final record takes the place of final records
// of less device time, least first, where that makes room: those are
// counted instead.
// An error, naming the fault, when the request holds anything but records
// of job `job_id` (the job whose comment it is).
Result<std::string> merge_append_request(std::string_view existing, std::string_view request,
                                         uint64_t job_id, size_t max_length = kMaxAdminComment);

// The egpu records in an AdminComment, in order, and how many were dropped
// for room ("egpu dropped=N"); the admin's own text is left out. Several
// lines are several jobs' comments (sacct's and squeue's listings).
struct CommentRecords {
  std::vector<std::string> records;
  uint64_t dropped = 0;
};
CommentRecords records_in_comment(std::string_view admin_comment);

}  // namespace egpu::accounting
