// InstanceRuntime: the agent's side of one instance's page: it creates the
// page (owned by the job's uid, 0600), hands process slots to attaching
// processes, reads what their shims publish (activity, device time, memory) and
// reclaims the slots of processes that died.
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/faa/arbiter_policy.h"
#include "core/model/instance_registry.h"
#include "core/shm/latency_counts.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/util/log_budget.h"
#include "core/util/result.h"
#include "nodeagent/user_page_guard.h"

namespace egpu::agent {

// What one scan of the page showed: the policy's input (core/faa/arbiter_policy.h).
using InstanceActivity = faa::Activity;

class InstanceRuntime {
 public:
  // Creates (or, after an agent restart, reopens) the page of `instance`. A
  // page that is not the instance's on reopen (truncated, overwritten by its
  // user) is started afresh: the instance keeps its units either way.
  static Result<InstanceRuntime> open(const std::string& runtime_dir,
                                      const model::Instance& instance, bool reopen);
  InstanceRuntime(InstanceRuntime&&) = default;
  InstanceRuntime& operator=(InstanceRuntime&&) = default;

  // Each page lies in a root-owned directory of its own: an unlink stuck
  // on a page whose user holds its lock then holds that directory's lock,
  // not RuntimeDir's, which every create takes (see PageChores).
  static std::string page_dir(const std::string& runtime_dir, uint64_t instance_id);
  static std::string page_path(const std::string& runtime_dir, uint64_t instance_id);
  // Where an agent before that layout kept the page: taken over as it is.
  static std::string legacy_page_path(const std::string& runtime_dir, uint64_t instance_id);

  // A slot for `pid`: its existing one when it attaches again, else a free one
  // with zeroed counters. -1 when all are taken.
  int attach(pid_t pid);
  // The process in `slot` exited: its device time is collected by the next
  // scan, its memory stops counting at once.
  void reclaim(uint32_t slot, pid_t pid);

  InstanceActivity scan();

  // After the job truncated its page under the agent (see UserPageGuard):
  // a fresh page in its place, which processes get when they attach again.
  // The broken page's name goes first, on a chore worker (PageChores); the
  // fresh page comes at the first look after that. `cut_short`: the file is
  // shorter than a page, though no access has faulted yet.
  void repair_if_broken(bool cut_short = false);

  // Its user can ftruncate or fallocate its own page to any length, and the
  // file lies on the agent's RuntimeDir filesystem (/run unless it has its
  // own): growth there is room taken from every other user of it. Each look
  // starts taking back growth it sees (on a chore worker: the truncation
  // takes the file's lock, which its user can hold). A page that holds no
  // more than what the last trim could not free (an ext4 attribute's block,
  // a huge page khugepaged made) is trimmed again after 2, 4, ... 64 s, not
  // every second: what that room is made of can change (the attribute
  // removed, a block allocated instead), but what is more is taken back at
  // the next look.
  struct Growth {
    uint64_t taken_back = 0;  // bytes, by chores that finished since the last look
    bool pending = false;     // a chore is taking growth back now
    bool started = false;     // ...started by this look
  };
  // `now_or_never`: no back-off (a create found no room for its page).
  Growth take_back_growth(int64_t now, bool now_or_never = false);

  shm::InstancePage* page() const { return page_.mapping.as<shm::InstancePage>(); }
  int fd() const { return page_.fd.get(); }
  const std::string& path() const { return path_; }
  // The page's own directory; empty for a page of the legacy layout.
  const std::string& dir() const { return dir_; }
  uint64_t memory_used() const;
  uint64_t throttled_ns() const;
  uint64_t device_ns_total() const { return device_ns_total_; }
  // The latency counts its processes wrote (cumulative; see InstancePage).
  slo::LatencyHistogram::Counts latency_counts() const;
  // The bursts its shims measured, summed, and the part spent at the gate.
  shm::BurstTotals bursts() const { return shm::read_burst_totals(*page()); }
  uint64_t mem_denied() const;
  uint32_t processes() const;
  // The pid the agent gave slot `slot` (at a restart, the one its page named
  // when it was opened); 0 where none.
  pid_t given_to(uint32_t slot) const { return slot < given_.size() ? given_[slot] : 0; }

 private:
  InstanceRuntime(shm::PageFile page, std::string runtime_dir, model::Instance identity,
                  std::string path, std::string dir);

  // may_hold_ from a page's own storage on RuntimeDir's filesystem, once
  // it can be measured.
  void measure_own_storage();

  shm::PageFile page_;
  UserPageGuard guard_;  // after page_: stops watching before the unmap
  std::string runtime_dir_;
  model::Instance identity_;  // what a fresh page is made of
  std::string path_;
  std::string dir_;
  std::array<uint64_t, shm::kMaxProcsPerInstance> seen_device_ns_{};
  std::array<uint64_t, shm::kMaxProcsPerInstance> seen_launches_{};
  // The pid each slot was handed to (or adopted with), 0 for a slot not
  // handed out: the agent's own record, since the job may rewrite the
  // page's.
  std::array<pid_t, shm::kMaxProcsPerInstance> given_{};
  uint64_t device_ns_total_ = 0;
  int64_t pending_device_ns_ = 0;  // from reclaimed slots, charged at the next scan
  // The storage the page may hold before take_back_growth() takes some
  // back: what a page holds on RuntimeDir's filesystem (see open()).
  uint64_t may_hold_ = (sizeof(shm::InstancePage) + 4095) / 4096 * 4096;
  bool own_storage_measured_ = false;  // may_hold_ is a page's measured storage
  // Trims in a row that left room it may not hold, and when the next such
  // one is due (0: none planned).
  uint32_t fruitless_trims_ = 0;
  int64_t next_trim_ns_ = 0;
  // Replacements of a truncated page that failed. Both logs are carried to
  // each fresh page with the count: a user who cuts each fresh page at every
  // attach, or makes every other replacement fail, gets a line a minute of
  // each.
  uint64_t repair_failures_ = 0;
  LogBudget repair_failed_log_{1, 1.0 / 60};
  LogBudget replaced_log_{1, 1.0 / 60};
  // Replacements of a truncated page: four at once, then one a second (a
  // token bucket; carried to each fresh page like the logs).
  LogBudget replacements_{4, 1.0};
  // Shared with the page's chore while one runs (at most one at a time).
  struct ChoreState {
    std::atomic<bool> busy{false};
    std::atomic<uint64_t> taken_back{0};
    // The room (length or storage, the larger) a trim left that is more
    // than the page may hold; 0 when it left none.
    std::atomic<uint64_t> untrimmable_room{0};
  };
  std::shared_ptr<ChoreState> chore_ = std::make_shared<ChoreState>();
  // Runs work(descriptor, state) on a chore worker (PageChores) with a
  // descriptor of its own of the page, closed after; one chore per page at
  // a time. False where one is running or none could be queued.
  template <typename Work>
  bool start_chore(Work work);
};

}  // namespace egpu::agent
