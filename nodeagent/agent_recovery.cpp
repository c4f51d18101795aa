// What a restarted agent takes over from the one before: the instances its
// pages record, their processes, and the files no instance holds any more.
#include <sys/stat.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <utility>

#include "core/util/log.h"
#include "nodeagent/agent.h"
#include "nodeagent/page_chores.h"
#include "nodeagent/peer_process.h"

namespace egpu::agent {
namespace {

// Whether a pid read back from an instance's page after a restart is one of
// its processes. The page is the job's to write, so a slot is a claim. An
// attach proved its process the instance user's (SO_PEERCRED), and only a
// privileged process takes another uid later: on a user's page, another
// uid's process is a forgery, told without reading anything of it (a
// process's maps cost its mapping count to read, 34 ms for 65,530, which
// every forged slot would add to the agent's start). Only on root's page,
// root's to write, may it be a server that dropped its privileges after
// attaching: adopted if it maps the page. `proc` is what has the pid now.
bool adoptable(const PinnedProcess& proc, pid_t pid, const model::Instance& inst,
               const std::string& runtime_dir, std::optional<uid_t>* foreign) {
  if (pid == ::getpid()) return false;  // the agent maps every page itself
  if (proc.uid == inst.uid) return true;
  *foreign = proc.uid;
  if (inst.uid != 0) return false;
  struct stat page {};
  const bool found =
      ::stat(InstanceRuntime::page_path(runtime_dir, inst.id).c_str(), &page) == 0 ||
      ::stat(InstanceRuntime::legacy_page_path(runtime_dir, inst.id).c_str(), &page) == 0;
  // Read by pid: the pinned process's maps only if it still runs after.
  return found && ProcessTracker::maps_file(pid, page.st_dev, page.st_ino) &&
         !has_exited(proc.pidfd.get());
}

}  // namespace

void Agent::remove_orphan_pages() {
  // Pages of instances no agent holds any more: a previous agent's that this
  // one could not take over (another page layout), or that died before it
  // removed them, and directories set aside whose chores did not run. Their
  // processes keep their mappings; the files would only linger, and make
  // `egpu-agentd --check-pages` see instances that are gone. Each goes on a
  // chore: a page is its user's, who may hold its lock (see PageChores).
  constexpr size_t kSize = sizeof(shm::InstancePage);
  const auto owner = [](const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 ? st.st_uid : 0;
  };
  std::error_code ec;
  std::filesystem::directory_iterator it(config_.runtime_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    const std::string path = it->path().string();
    const std::string file = it->path().filename().string();
    std::string_view name = file;
    if (name.starts_with(PageChores::kSetAsidePrefix)) {
      (void)PageChores::remove_set_aside(owner(path + "/page"), path, kSize);
      continue;
    }
    // instance-N.d/page, or instance-N (the layout before page directories).
    constexpr std::string_view kPrefix = "instance-";
    constexpr std::string_view kDirSuffix = ".d";
    if (!name.starts_with(kPrefix)) continue;
    const bool in_dir = name.ends_with(kDirSuffix);
    if (in_dir) name.remove_suffix(kDirSuffix.size());
    uint64_t id = 0;
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size();
    const auto [at, why] = std::from_chars(first, last, id);
    if (first == last || why != std::errc() || at != last) continue;
    const model::Instance* inst = registry_->find(id);
    const InstanceRuntime* runtime = inst != nullptr && inst->gpu < arbiters_.size()
                                         ? arbiters_[inst->gpu]->runtime(id)
                                         : nullptr;
    if (in_dir) {
      if (inst != nullptr) continue;
      const uid_t uid = owner(path + "/page");
      if (!PageChores::set_aside(uid, config_.runtime_dir, path, kSize)) continue;
    } else {
      // A legacy page goes once its instance has gone or moved to a page
      // directory. Its name is in RuntimeDir, so an unlink that waits on
      // its lock holds RuntimeDir's meanwhile (README: what is left).
      if (inst != nullptr && (runtime == nullptr || runtime->dir().empty())) continue;
      const bool queued =
          PageChores::run(owner(path), [path] { (void)PageChores::remove_page_at(path, kSize); });
      if (!queued) continue;
    }
    EGPU_LOG_INFO("removing %s: no agent holds instance %llu there", path.c_str(),
                  static_cast<unsigned long long>(id));
  }
}

Status Agent::recover(uint32_t gpu, const std::vector<model::Instance>& recovered) {
  GpuArbiter& arb = *arbiters_[gpu];
  std::vector<model::Instance> restored;
  for (const model::Instance& inst : recovered) {
    if (auto o = registry_->restore(inst); !o.ok()) {
      EGPU_LOG_WARN("GPU %u: dropping recorded instance %llu: %s", gpu,
                    static_cast<unsigned long long>(inst.id), o.message.c_str());
      continue;
    }
    restored.push_back(inst);
  }
  restore_latency_control(gpu);
  // Targets once every instance is known: an umbrella's share depends on its steps.
  for (const model::Instance& inst : restored) {
    if (Status s = arb.add(inst, targets(gpu).at(inst.id).first, registry_->memory_limit(inst),
                           /*reopen=*/true);
        !s) {
      EGPU_LOG_WARN("GPU %u: cannot recover instance %llu: %s", gpu,
                    static_cast<unsigned long long>(inst.id), s.error().c_str());
      registry_->erase(inst.id);  // the step's instances on other GPUs are recovered apart
      continue;
    }
    if (Status s = watch_kicks(gpu, inst.id); !s) return s;
    reaper_->watch(inst.id, inst.creator);  // its step may have ended meanwhile
    // Its processes: watch the living, reclaim the dead.
    uint32_t alive = 0;
    uint32_t forged = 0;                     // slots naming another uid's process
    std::pair<pid_t, uid_t> first_forged{};  // one of them, for the log
    std::set<pid_t> adopted;  // a process has one slot per instance: others are forged
    for (uint32_t slot = 0; slot < shm::kMaxProcsPerInstance; ++slot) {
      const pid_t pid = arb.process_in_slot(inst.id, slot);
      if (pid <= 0) continue;
      // Pinned first: checked by pid alone, a pid reused meanwhile would
      // have another user's process watched as this slot's.
      auto proc = pin_process(pid);
      std::optional<uid_t> foreign;
      if (!proc || adopted.contains(pid) ||
          !adoptable(*proc, pid, inst, config_.runtime_dir, &foreign)) {
        if (foreign && forged++ == 0) first_forged = {pid, *foreign};
        arb.reclaim(inst.id, slot, pid);  // gone: the slot is free again
        continue;
      }
      if (tracker_->track(Attachment{pid, inst.id, gpu, slot}, std::move(proc->pidfd))) {
        adopted.insert(pid);
        ++alive;
      } else {
        arb.reclaim(inst.id, slot, pid);
      }
    }
    if (forged > 0) {
      EGPU_LOG_WARN(
          "instance %llu: %u process slot(s) name a process not its user's (%u), such as "
          "process %d of uid %u%s: not adopted",
          static_cast<unsigned long long>(inst.id), forged, inst.uid, first_forged.first,
          first_forged.second, inst.uid == 0 ? ", that does not map its page" : "");
    }
    EGPU_LOG_INFO("recovered instance %llu (job %llu, GPU %u, %u units) with %u live process(es)",
                  static_cast<unsigned long long>(inst.id),
                  static_cast<unsigned long long>(inst.job_id), gpu, inst.units, alive);
  }
  return restored.empty() ? Status{} : retarget(gpu);
}

}  // namespace egpu::agent
