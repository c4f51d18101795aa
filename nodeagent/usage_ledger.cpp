#include "nodeagent/usage_ledger.h"

#include <new>

#include "core/shm/pages.h"
#include "core/util/log.h"

namespace egpu::agent {

struct UsageLedger::Entry {
  uint64_t instance_id;  // 0: free
  accounting::UsageTotals totals;
  uint64_t reserved[3];
};
static_assert(sizeof(accounting::UsageTotals) == 40);

struct UsageLedger::File {
  static constexpr uint32_t kMagic = 0x4c554745;  // "EGUL"
  static constexpr uint32_t kVersion = 1;
  uint32_t magic;
  uint32_t version;
  uint32_t gpu;
  uint32_t max_slots;
  uint64_t reserved[6];
  Entry entries[shm::kMaxSlotsPerGpu];
};

UsageLedger::File* UsageLedger::file() const {
  return file_.mapping.as<File>();
}

std::string UsageLedger::path(const std::string& runtime_dir, uint32_t gpu) {
  return runtime_dir + "/usage-gpu" + std::to_string(gpu);
}

Result<UsageLedger> UsageLedger::open(const std::string& runtime_dir, uint32_t gpu,
                                      uint32_t max_slots) {
  auto f = shm::open_page_file(path(runtime_dir, gpu), sizeof(File), 0, 0, 0600);
  if (!f) return Error{"usage ledger: " + f.error()};
  auto* file = f->mapping.as<File>();
  const bool reuse = !f->created && file->magic == File::kMagic &&
                     file->version == File::kVersion && file->gpu == gpu &&
                     file->max_slots <= max_slots;  // the slots past it are free (see begin)
  if (!reuse) {
    // Instances recovered now have no totals from before (they say so).
    EGPU_LOG_INFO("GPU %u: new usage ledger %s", gpu, path(runtime_dir, gpu).c_str());
    new (file) File();
    file->gpu = gpu;
    file->max_slots = max_slots;
    file->version = File::kVersion;
    file->magic = File::kMagic;
  }
  return UsageLedger(std::move(*f));
}

void UsageLedger::begin(uint32_t slot, uint64_t instance_id, int64_t now_unix_ns) {
  // A ledger of fewer slots (an older agent's) is raised only when a slot
  // past them is used: going back to that agent keeps the totals until then.
  if (slot >= file()->max_slots) file()->max_slots = slot + 1;
  Entry& e = file()->entries[slot];
  e = Entry{};
  e.instance_id = instance_id;
  e.totals.started_unix_ns = now_unix_ns;
}

void UsageLedger::resume(uint32_t slot, uint64_t instance_id, int64_t now_unix_ns) {
  Entry& e = file()->entries[slot];
  if (e.instance_id == instance_id) {
    ++e.totals.agent_restarts;
    return;
  }
  begin(slot, instance_id, now_unix_ns);
  e.totals.agent_restarts = 1;
  e.totals.partial = 1;
}

accounting::UsageTotals& UsageLedger::totals(uint32_t slot) {
  return file()->entries[slot].totals;
}

const accounting::UsageTotals& UsageLedger::totals(uint32_t slot) const {
  return file()->entries[slot].totals;
}

void UsageLedger::end(uint32_t slot) {
  file()->entries[slot] = Entry{};
}

}  // namespace egpu::agent
