// StepUsage: what one instance (a step's share of one GPU) achieved over its
// life. The agent keeps the totals in its ledger (nodeagent/usage_ledger.h),
// which outlives an agent restart, and hands them to SPANK when the step ends;
// SPANK writes them into Slurm's accounting (step_record.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace egpu::accounting {

// Persisted as is in the agent's ledger (root-only file): fixed size, plain.
struct UsageTotals {
  int64_t started_unix_ns = 0;  // CLOCK_REALTIME when the instance was created
  // Device time FAA charged: the shims' reports trimmed so the GPU is never
  // charged more time than passed, plus the held-time floor (what a holder
  // that under-reports is charged for holding the slice).
  uint64_t device_ns = 0;
  uint64_t throttled_ns = 0;    // time it asked for the GPU without holding it
  uint64_t mem_peak_bytes = 0;  // the most device memory it held at any look
  uint32_t agent_restarts = 0;  // agents that took it over from a previous one
  uint32_t partial = 0;         // 1: a restarted agent found no totals for it
};
static_assert(sizeof(UsageTotals) == 40);

// UsageFold: adds an agent's cumulative counters to the persisted totals. The
// counters start at 0 with each agent; the totals go on from what the
// previous agent left, so a restart loses at most what came after its last
// fold.
class UsageFold {
 public:
  // `charged_ns` and `throttled_ns`: this agent's counters for the instance;
  // `memory_bytes` its memory now, counted up to `memory_cap` (what it
  // reports is its processes' to write).
  void observe(UsageTotals& totals, uint64_t charged_ns, uint64_t throttled_ns,
               uint64_t memory_bytes, uint64_t memory_cap);

 private:
  uint64_t last_charged_ = 0;
  uint64_t last_throttled_ = 0;
};

struct StepUsage {
  uint32_t gpu = 0;
  uint32_t units = 0;  // the step's units when it ended
  UsageTotals totals;
  int64_t ended_unix_ns = 0;
  std::string step;  // its step's label ("0", "batch"...); empty: not said

  double elapsed_s() const;
  double device_s() const { return static_cast<double>(totals.device_ns) / 1e9; }
  double throttled_s() const { return static_cast<double>(totals.throttled_ns) / 1e9; }
  // Device time over elapsed time: the share of the GPU it had on average
  // (0 for an instance that lived no time).
  double achieved_share() const;
};

// The agent's reply to a remove: how many instances went and what each
// achieved, as JSON ({"removed":N,"usage":[{...},...]}).
std::string removal_to_json(size_t removed, const std::vector<StepUsage>& usage);
// The agent's reply to a usage request (protocol::UsageRequest): what a
// running step's instances achieved so far, as {"usage":[{...},...]}
// (ended_unix_ns: when the figures were taken).
std::string usage_to_json(const std::vector<StepUsage>& usage);
// Reads either reply back; an error names what is wrong.
Result<std::vector<StepUsage>> usage_from_json(std::string_view text);

}  // namespace egpu::accounting
