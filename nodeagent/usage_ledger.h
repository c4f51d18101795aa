// UsageLedger: what each instance on one GPU has achieved so far
// (accounting::UsageTotals), in a root-only file in the runtime directory, so
// that a restarted agent goes on from where the previous one stopped instead
// of reporting only what came after it. The counters the agent takes the
// totals from (FAA's charges, its throttled time) start afresh with every
// agent; the pages the jobs write cannot be trusted to keep them. The file is
// never handed to anyone: only the agent reads and writes it.
#pragma once

#include <cstdint>
#include <string>

#include "core/accounting/step_usage.h"
#include "core/shm/page_file.h"
#include "core/util/result.h"

namespace egpu::agent {

class UsageLedger {
 public:
  // Opens the GPU's ledger, or starts a new one where the file is missing or
  // is not one this agent wrote (another layout, GPU or slot count).
  static Result<UsageLedger> open(const std::string& runtime_dir, uint32_t gpu, uint32_t max_slots);
  static std::string path(const std::string& runtime_dir, uint32_t gpu);

  // A new instance in `slot`: zero totals, started now.
  void begin(uint32_t slot, uint64_t instance_id, int64_t now_unix_ns);
  // An instance a restarted agent took over: its totals go on, one more
  // restart counted; with no totals of its own it starts now, marked partial.
  void resume(uint32_t slot, uint64_t instance_id, int64_t now_unix_ns);
  accounting::UsageTotals& totals(uint32_t slot);
  const accounting::UsageTotals& totals(uint32_t slot) const;
  void end(uint32_t slot);

 private:
  explicit UsageLedger(shm::PageFile file) : file_(std::move(file)) {}
  struct Entry;
  struct File;
  File* file() const;

  shm::PageFile file_;
};

}  // namespace egpu::agent
