#include "nodeagent/instance_runtime.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <utility>

#include "core/quota/memory_quota.h"
#include "core/shm/latency_counts.h"
#include "core/shm/proc_slot_io.h"
#include "core/util/clock.h"
#include "core/util/log.h"
#include "core/util/unique_fd.h"
#include "nodeagent/page_chores.h"

namespace egpu::agent {
namespace {

// The most device time one process may report in one scan: the page is the
// job's, and its counters may jump anywhere (found by fuzz.instance_page).
constexpr uint64_t kMaxReportNs = 3'600'000'000'000;  // an hour

// Forward progress of a counter the job writes: never negative, bounded.
int64_t progress(uint64_t now, uint64_t seen) {
  return now > seen ? static_cast<int64_t>(std::min(now - seen, kMaxReportNs)) : 0;
}

// The page's length and the storage it holds (the larger counts as its room).
std::pair<uint64_t, uint64_t> extent_of(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return {0, 0};
  return {st.st_size > 0 ? static_cast<uint64_t>(st.st_size) : 0,
          st.st_blocks > 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0};
}

// Whether the page's file is shorter than a page; a failed fstat says
// nothing, and a healthy page must not be replaced on its word.
bool cut_short(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && st.st_size < static_cast<off_t>(sizeof(shm::InstancePage));
}

// The storage a page of its own holds on `dir`'s filesystem once its
// contents are written (a tmpfs with huge pages backs it with one): made
// and measured in a file of root's, 0600, as a page its user can grow
// while it is measured would say anything. 0 where it cannot be measured
// (no room left there, say). Measured once per directory: the filesystem's
// answer does not change.
uint64_t storage_of_a_page(const std::string& dir) {
  static std::map<std::string, uint64_t> measured;  // the agent's thread only
  if (auto it = measured.find(dir); it != measured.end()) return it->second;
  constexpr size_t kSize = sizeof(shm::InstancePage);
  UniqueFd probe(::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!probe.valid()) {
    // A filesystem without O_TMPFILE (overlayfs before Linux 6.6): a name
    // of its own for as long as it takes to unlink it.
    std::string name = dir + "/.page-size-XXXXXX";
    probe = UniqueFd(::mkostemp(name.data(), O_CLOEXEC));
    if (!probe.valid()) return 0;
    ::unlink(name.c_str());
  }
  // Its space reserved first, as a page's is (page_file.cpp): a fault into
  // a tmpfs with no room left is a SIGBUS no guard watches for here.
  if (::fallocate(probe.get(), 0, 0, kSize) != 0) return 0;
  auto mapping = shm::map_fd(probe.get(), kSize, shm::Access::kReadWrite);
  if (!mapping) return 0;
  std::memset(mapping->get(), 0, kSize);  // every page faulted, as the agent's own write does
  const uint64_t held = extent_of(probe.get()).second;
  if (held != 0) measured.emplace(dir, held);
  return held;
}

}  // namespace

InstanceRuntime::InstanceRuntime(shm::PageFile page, std::string runtime_dir,
                                 model::Instance identity, std::string path, std::string dir)
    : page_(std::move(page)),
      runtime_dir_(std::move(runtime_dir)),
      identity_(std::move(identity)),
      path_(std::move(path)),
      dir_(std::move(dir)) {}

std::string InstanceRuntime::page_dir(const std::string& runtime_dir, uint64_t instance_id) {
  return runtime_dir + "/instance-" + std::to_string(instance_id) + ".d";
}

std::string InstanceRuntime::page_path(const std::string& runtime_dir, uint64_t instance_id) {
  return page_dir(runtime_dir, instance_id) + "/page";
}

std::string InstanceRuntime::legacy_page_path(const std::string& runtime_dir,
                                              uint64_t instance_id) {
  return runtime_dir + "/instance-" + std::to_string(instance_id);
}

namespace {

// The page's directory: root's, 0711 (nobody else writes it, nor lists it:
// see make_runtime_dir in agent.cpp). Nothing but the agent creates anything
// in RuntimeDir, so one that is not so is damage.
Status make_page_dir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0711) != 0 && errno != EEXIST)
    return Error{"cannot create " + dir + ": " + std::strerror(errno)};
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0)
    return Error{dir + " is not a directory of root's"};
  if ((st.st_mode & 07777) != 0711 && ::chmod(dir.c_str(), 0711) != 0)
    return Error{"cannot set the mode of " + dir + ": " + std::strerror(errno)};
  return {};
}

}  // namespace

Result<InstanceRuntime> InstanceRuntime::open(const std::string& runtime_dir,
                                              const model::Instance& instance, bool reopen) {
  constexpr size_t kSize = sizeof(shm::InstancePage);
  std::string dir = page_dir(runtime_dir, instance.id);
  std::string path = page_path(runtime_dir, instance.id);
  struct stat st {};
  if (reopen && ::lstat(path.c_str(), &st) != 0 &&
      ::lstat(legacy_page_path(runtime_dir, instance.id).c_str(), &st) == 0 &&
      S_ISREG(st.st_mode) && st.st_uid == instance.uid && st.st_size == kSize) {
    // A page an agent before the directory layout made: its processes map
    // it, so it is taken over where it is. One that is not usable as it is
    // stays where it is (a fresh page goes to the new place).
    path = legacy_page_path(runtime_dir, instance.id);
    dir.clear();
  }
  if (!dir.empty()) {
    if (Status s = make_page_dir(dir); !s) return Error{s.error()};
    // A page left there that is not to be reopened goes (a create's that
    // failed after its chown, or one its user made unusable: another size,
    // a lease). Root's goes at once; a user's directory is set aside and
    // removed on a chore (its lock may be held: see PageChores).
    if (::lstat(path.c_str(), &st) == 0) {
      const bool keep = reopen && S_ISREG(st.st_mode) && st.st_uid == instance.uid &&
                        st.st_size == static_cast<off_t>(kSize);
      if (!keep && st.st_uid == 0) {
        ::unlink(path.c_str());
      } else if (!keep) {
        if (!PageChores::set_aside(instance.uid, runtime_dir, dir, kSize))
          return Error{"cannot move " + dir + " out of the way: " + std::strerror(errno)};
        if (Status s = make_page_dir(dir); !s) return Error{s.error()};
      }
    }
  }
  auto file = shm::open_page_file(path, kSize, instance.uid, instance.gid, 0600);
  if (!file && file.error_code() == EBUSY) {
    // Changed by its user since the look above (a lease, another size): a
    // legacy page stays where it is, a page in its directory is set aside,
    // and a fresh page is made in the new place.
    const bool moved = dir.empty() || PageChores::set_aside(instance.uid, runtime_dir, dir, kSize);
    dir = page_dir(runtime_dir, instance.id);
    path = page_path(runtime_dir, instance.id);
    if (moved) {
      if (Status s = make_page_dir(dir); !s) return Error{s.error()};
      file = shm::open_page_file(path, kSize, instance.uid, instance.gid, 0600);
    }
  }
  if (!file) return file.failure();  // its errno too: ENOSPC is tried again
  // Watched before the agent first touches it: its user owns the file from
  // the chown on and may truncate it at any moment, even now.
  auto guard = UserPageGuard::watch(file->mapping.get(), file->mapping.size());
  if (!guard) return Error{path + ": " + guard.error()};
  auto* page = file->mapping.as<shm::InstancePage>();
  const bool valid = !file->created && page->magic == shm::kInstancePageMagic &&
                     page->version == shm::kLayoutVersion && page->instance_id == instance.id;
  if (reopen && !valid) {
    // Its user can write, truncate or replace the contents of its own page;
    // dropping the instance for that would free its units to others and let
    // its processes run unattached. What the page said is lost, not the instance.
    EGPU_LOG_WARN("%s is not the page of instance %llu any more; starting it afresh", path.c_str(),
                  static_cast<unsigned long long>(instance.id));
  }
  if (!valid) {
    new (page) shm::InstancePage();
    page->instance_id = instance.id;
    page->gpu_index = instance.gpu;
    page->gpu_slot = instance.slot;
    if (!quota::init_instance_lock(page)) return Error{"cannot initialise the lock of " + path};
    page->version = shm::kLayoutVersion;
    std::atomic_thread_fence(std::memory_order_release);
    page->magic = shm::kInstancePageMagic;
  }
  InstanceRuntime rt(std::move(*file), runtime_dir, instance, path, dir);
  rt.guard_ = std::move(*guard);
  rt.measure_own_storage();
  // Start from what the shims already reported: nothing is charged twice.
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    const shm::ProcReading r = shm::read_proc_slot(page->procs[i]);
    rt.seen_device_ns_[i] = r.device_ns;
    rt.seen_launches_[i] = r.launches;
    // After a restart the recovery checks each of these and reclaims the dead.
    rt.given_[i] = r.pid;  // 0 where free
  }
  return rt;
}

template <typename Work>
bool InstanceRuntime::start_chore(Work work) {
  if (chore_->busy.load()) return false;
  const int copy = ::fcntl(fd(), F_DUPFD_CLOEXEC, 0);
  if (copy < 0) return false;
  chore_->busy.store(true);
  const bool queued =
      PageChores::run(identity_.uid, [chore = chore_, copy, work = std::move(work)] {
        work(copy, *chore);
        ::close(copy);  // not the last reference: the agent's own stays open
        chore->busy.store(false);
      });
  if (!queued) {
    ::close(copy);
    chore_->busy.store(false);
  }
  return queued;
}

void InstanceRuntime::repair_if_broken(bool cut_short) {
  if (!guard_.broken() && !cut_short) return;
  // The broken page is not touched on this thread (its lock may be held):
  // its directory is set aside (PageChores::set_aside, in open), and a page
  // of the legacy layout is left where it is, to the next start's cleanup.
  // Meanwhile, and where no fresh page can be made, the page reads as zeros.
  // Each replacement leaves a chore (the removal of what was set aside): a
  // user that truncates every fresh page while its jobs hold the workers
  // gets no more replacements past its chore backlog, which bounds what it
  // leaves in RuntimeDir.
  if (PageChores::backlog(identity_.uid) >= PageChores::kMaxBacklogPerUser) return;
  // Each replacement is some twenty system calls on the agent's thread: a
  // user cutting every fresh page at every look gets a few a second.
  if (!replacements_.take(monotonic_ns()).log) return;
  auto fresh = open(runtime_dir_, identity_, /*reopen=*/false);
  if (!fresh) {
    // Tried again at the next look (what failed may have left a page of its
    // user's there: that is set aside then). A user racing each fresh page
    // fails every look: logged once a minute.
    ++repair_failures_;
    if (repair_failed_log_.take(monotonic_ns()).log) {
      EGPU_LOG_WARN(
          "instance %llu: its user truncated its page, which cannot be replaced (%llu failed "
          "replacements so far): %s",
          static_cast<unsigned long long>(identity_.id),
          static_cast<unsigned long long>(repair_failures_), fresh.error().c_str());
    }
    return;
  }
  const uint64_t total = device_ns_total_;
  const int64_t pending = pending_device_ns_;
  const uint64_t failures = repair_failures_;
  const LogBudget failed_log = repair_failed_log_;
  const LogBudget replaced_log = replaced_log_;
  const LogBudget replacements = replacements_;
  *this = std::move(*fresh);
  replacements_ = replacements;
  device_ns_total_ = total;
  pending_device_ns_ = pending;
  repair_failures_ = failures;
  repair_failed_log_ = failed_log;
  replaced_log_ = replaced_log;
  if (const auto v = replaced_log_.take(monotonic_ns()); v.log) {
    EGPU_LOG_WARN("instance %llu: its user truncated its page; the page was replaced%s",
                  static_cast<unsigned long long>(identity_.id), dropped_note(v).c_str());
  }
}

void InstanceRuntime::measure_own_storage() {
  if (own_storage_measured_) return;
  const uint64_t own = storage_of_a_page(runtime_dir_);
  if (own == 0) return;  // no room to measure in (yet): the page's length until there is
  may_hold_ = std::max(may_hold_, own);
  own_storage_measured_ = true;
}

InstanceRuntime::Growth InstanceRuntime::take_back_growth(int64_t now, bool now_or_never) {
  constexpr uint64_t kSize = sizeof(shm::InstancePage);
  Growth g;
  // Unmeasured where the filesystem had no room at the open (a page that
  // took the last of it): a huge page allowed for good then let every such
  // page keep 2 MiB its job fallocated, never trimmed.
  measure_own_storage();
  g.taken_back = chore_->taken_back.exchange(0);
  // What the page may hold was measured on a file of root's (see open()),
  // not after a trim of this one: its user can grow it again between the
  // trim and the look, and what the look saw would be allowed for good.
  if (chore_->busy.load()) {
    g.pending = true;
    return g;
  }
  const auto [length, held] = extent_of(fd());  // fstat takes no lock the user can hold
  if (length <= kSize && held <= may_hold_) {
    fruitless_trims_ = 0;
    next_trim_ns_ = 0;
    chore_->untrimmable_room.store(0);
    return g;
  }
  const uint64_t room = std::max(length, held);
  if (room > chore_->untrimmable_room.load() || now_or_never) {
    fruitless_trims_ = 0;  // grown past what the last trim left: taken back now
  } else if (next_trim_ns_ == 0) {
    constexpr int64_t kFirstRetryNs = 2'000'000'000;
    fruitless_trims_ = std::min<uint32_t>(fruitless_trims_ + 1, 6);  // up to 64 s
    next_trim_ns_ = now + (kFirstRetryNs << (fruitless_trims_ - 1));
    return g;
  } else if (now < next_trim_ns_) {
    return g;
  }
  next_trim_ns_ = 0;
  // Shrinking to the page's own length frees what lies past it, also
  // blocks fallocated past the end (FALLOC_FL_KEEP_SIZE); no process maps
  // further.
  g.pending = start_chore([room, may_hold = may_hold_](int copy, ChoreState& chore) {
    if (::ftruncate(copy, static_cast<off_t>(kSize)) != 0) return;
    const auto [length_now, held_now] = extent_of(copy);
    const uint64_t room_now = std::max(length_now, held_now);
    chore.taken_back.fetch_add(room > room_now ? room - room_now : 0);
    // What the trim could not free: storage within its length, up to a huge
    // page. Its user may have grown it again since the ftruncate (longer,
    // or more than that): that is growth, trimmed at the next look.
    constexpr uint64_t kHugePage = 2u << 20;
    const bool untrimmable =
        length_now <= kSize && held_now > may_hold && held_now <= may_hold + kHugePage;
    chore.untrimmable_room.store(untrimmable ? room_now : 0);
  });
  g.started = g.pending;
  return g;
}

int InstanceRuntime::attach(pid_t pid) {
  // An attach reads the slots only: a page cut short past them would be
  // caught at a later tick's look at its end, and the process would attach
  // to the page its job is breaking. Its length says so now.
  repair_if_broken(cut_short(fd()));
  auto* p = page();
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    const shm::ProcReading r = shm::read_proc_slot(p->procs[i]);
    if (r.pid != pid) continue;
    if (given_[i] == 0) {
      // A slot the job wrote this pid into itself, not one the agent gave:
      // it is looked at from now on (scan() reads only attached slots, so
      // the process would run uncharged), from what it says now.
      seen_device_ns_[i] = r.device_ns;
      seen_launches_[i] = r.launches;
    }
    given_[i] = pid;
    return static_cast<int>(i);
  }
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    // Free: a slot the agent did not give out, whatever the job wrote there
    // (pids in every slot would have its later processes refused, and run
    // unpaced), or one it gave out that reads free (its process ended, or
    // the job wrote 0 or a negative pid there, as scan() reads it).
    if (given_[i] != 0 && shm::read_proc_slot(p->procs[i]).pid != 0) continue;
    seen_device_ns_[i] = 0;
    seen_launches_[i] = 0;
    shm::claim_proc_slot(p->procs[i], pid);
    given_[i] = pid;
    return static_cast<int>(i);
  }
  return -1;
}

void InstanceRuntime::reclaim(uint32_t slot, pid_t pid) {
  // The slot the agent gave `pid`, whatever pid the page says now (its
  // job may have rewritten it).
  if (slot >= shm::kMaxProcsPerInstance || given_[slot] != pid) return;
  auto& s = page()->procs[slot];
  const shm::ProcReading r = shm::read_proc_slot(s);
  const uint64_t dev = r.device_ns;
  pending_device_ns_ = std::min<int64_t>(pending_device_ns_ + progress(dev, seen_device_ns_[slot]),
                                         static_cast<int64_t>(kMaxReportNs));
  seen_device_ns_[slot] = dev;
  // The driver freed its memory with the process.
  shm::release_proc_slot(s);
  given_[slot] = 0;
}

InstanceActivity InstanceRuntime::scan() {
  repair_if_broken();
  InstanceActivity a;
  a.device_ns = pending_device_ns_;
  pending_device_ns_ = 0;
  auto* p = page();
  // Only the slots the agent gave out: each is a cache line its process
  // writes, and a tick looks at every instance on the GPU.
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i) {
    if (given_[i] == 0) continue;
    const shm::ProcReading s = shm::read_proc_slot(p->procs[i]);
    if (s.pid == 0) continue;
    ++a.processes;
    // Device time is cumulative: take only forward progress, bounded (64
    // processes x an hour cannot overflow the sum).
    a.device_ns += progress(s.device_ns, seen_device_ns_[i]);
    seen_device_ns_[i] = s.device_ns;
    if (s.launches != seen_launches_[i]) a.launched = true;
    seen_launches_[i] = s.launches;
    a.busy += s.busy;
    a.inflight_ns += s.inflight_ns;
    if (s.busy > 0) a.reported_inflight_ns += s.inflight_ns;
    a.idle_since_ns = std::max(a.idle_since_ns, s.idle_since_ns);
  }
  // Saturates: a counter (metrics, status) never goes backwards.
  device_ns_total_ += std::min(static_cast<uint64_t>(a.device_ns), UINT64_MAX - device_ns_total_);
  return a;
}

uint64_t InstanceRuntime::memory_used() const {
  return quota::used(page());
}

uint64_t InstanceRuntime::throttled_ns() const {
  uint64_t total = 0;
  for (const auto& s : page()->procs)
    total += shm::read_proc_slot(s).throttled_ns;
  return total;
}

uint64_t InstanceRuntime::mem_denied() const {
  uint64_t total = 0;
  for (const auto& s : page()->procs)
    total += shm::read_proc_slot(s).mem_denied;
  return total;
}

uint32_t InstanceRuntime::processes() const {
  // The slots the agent handed out, not whatever the job wrote into its page.
  uint32_t n = 0;
  for (uint32_t i = 0; i < shm::kMaxProcsPerInstance; ++i)
    n += given_[i] != 0 && shm::read_proc_slot(page()->procs[i]).pid != 0 ? 1 : 0;
  return n;
}

slo::LatencyHistogram::Counts InstanceRuntime::latency_counts() const {
  return shm::read_latency_counts(*page());
}

}  // namespace egpu::agent
