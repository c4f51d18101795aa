// egpuctl usage JOB: what each step of a job achieved on each GPU of each
// node, from the records SPANK leaves in the job's AdminComment when a step
// ends, or checkpoints while it runs (core/accounting/admin_comment.h). sacct has them after the
// job ended; without slurmdbd, squeue has them while slurmctld keeps the job. Slurm decides who
// may see the job.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/accounting/admin_comment.h"
#include "core/accounting/step_record.h"
#include "core/util/subprocess.h"
#include "nodeagent/egpuctl/commands.h"

namespace egpu::ctl {
namespace {

constexpr int kSlurmTimeoutMs = 30'000;

// The job's AdminComment as sacct, else squeue, has it (one line per job
// of an array or heterogeneous job).
Result<std::string> admin_comment(const std::string& job) {
  auto runs = run_processes({{"sacct", "-n", "-P", "-X", "-j", job, "-o", "AdminComment"}},
                            kSlurmTimeoutMs);
  if (runs.front().ok()) {
    std::string out = runs.front().out;
    while (!out.empty() && (out.back() == '\n' || out.back() == ' '))
      out.pop_back();
    if (!out.empty()) return out;
  }
  const std::string sacct_failure = runs.front().failure();
  const bool no_sacct = !runs.front().spawn_error.empty();
  // The one field, never `scontrol show job`'s text: the job's name, work
  // directory and command (the user's) come on lines of their own there,
  // and one with a newline and "AdminComment=" in it forged the records.
  runs = run_processes({{"squeue", "-h", "-t", "all", "-j", job, "-O", "admin_comment:0"}},
                       kSlurmTimeoutMs);
  if (no_sacct && !runs.front().spawn_error.empty()) {
    return Error{"usage needs Slurm's sacct or squeue, and neither can be run here (" +
                 runs.front().spawn_error + ")"};
  }
  if (!runs.front().ok()) {
    return Error{"neither sacct (" + (sacct_failure.empty() ? "no record" : sacct_failure) +
                 ") nor squeue (" + runs.front().failure() + ") knows job " + job};
  }
  return runs.front().out;  // "(null)" where it has none: no records in it
}

}  // namespace

int cmd_usage(const Globals& g, const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0].empty() || args[0].size() > 10 ||
      args[0].find_first_not_of("0123456789") != std::string::npos) {
    return fail("usage: egpuctl usage JOB (a job id)", 2);
  }
  auto comment = admin_comment(args[0]);
  if (!comment) return fail(comment.error());
  const accounting::CommentRecords found = accounting::records_in_comment(*comment);
  if (found.records.empty()) {
    return fail("job " + args[0] +
                " has no egpu records: none of its egpu steps has ended or reached its first "
                "checkpoint yet, or its nodes have StepRecords=no");
  }
  static constexpr const char* kColumns[] = {"step",  "node",         "gpu",
                                             "units", "elapsed_s",    "device_s",
                                             "share", "mem_peak_mib", "throttled_s"};
  nlohmann::json list = nlohmann::json::array();
  if (!g.json) {
    std::printf("%-16s %-12s %3s %5s %10s %10s %6s %12s %11s  %s\n", "STEP", "NODE", "GPU", "UNITS",
                "ELAPSED_S", "DEVICE_S", "SHARE", "MEM_PEAK_MIB", "THROTTLED_S", "NOTE");
  }
  for (const std::string& record : found.records) {
    std::vector<std::pair<std::string, std::string>> fields;
    if (!accounting::parse_step_record(record, &fields)) continue;
    nlohmann::json j;
    std::string note;
    for (const auto& [k, v] : fields) {
      if (k == "step" || k == "node") {
        j[k] = v;
      } else if (k == "partial") {
        j[k] = true;
        note += (note.empty() ? "" : ", ") + std::string("partial");
      } else if (k == "running") {
        // A checkpoint: the job ended (or has not yet) before the step's final record.
        j[k] = true;
        note += (note.empty() ? "" : ", ") + std::string("running at last checkpoint");
      } else if (k == "agent_restarts") {
        j[k] = std::strtoull(v.c_str(), nullptr, 10);
        note += (note.empty() ? "" : ", ") + v + " agent restart(s)";
      } else if (k == "gpu" || k == "units" || k == "mem_peak_mib") {
        j[k] = std::strtoull(v.c_str(), nullptr, 10);
      } else {
        j[k] = std::strtod(v.c_str(), nullptr);
      }
    }
    if (g.json) {
      list.push_back(j);
      continue;
    }
    std::vector<std::string> cells;
    for (const char* c : kColumns) {
      for (const auto& [k, v] : fields)
        if (k == c) cells.push_back(v);
    }
    if (cells.size() != std::size(kColumns)) continue;
    char line[512];
    std::snprintf(line, sizeof line, "%-16s %-12s %3s %5s %10s %10s %6s %12s %11s  %s",
                  cells[0].c_str(), cells[1].c_str(), cells[2].c_str(), cells[3].c_str(),
                  cells[4].c_str(), cells[5].c_str(), cells[6].c_str(), cells[7].c_str(),
                  cells[8].c_str(), note.c_str());
    std::string text = line;
    while (!text.empty() && text.back() == ' ')
      text.pop_back();
    std::printf("%s\n", text.c_str());
  }
  if (g.json) {
    std::printf("%s\n", nlohmann::json{{"job", std::strtoull(args[0].c_str(), nullptr, 10)},
                                       {"records", list},
                                       {"dropped", found.dropped}}
                            .dump()
                            .c_str());
  } else if (found.dropped > 0) {
    std::printf("(%llu more records were dropped: the AdminComment was full)\n",
                static_cast<unsigned long long>(found.dropped));
  }
  return 0;
}

}  // namespace egpu::ctl
