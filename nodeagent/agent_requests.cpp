// The agent's control requests: attach, create, remove, resize, status and
// show, each checked against the caller's credentials (SO_PEERCRED).
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/protocol/codec.h"
#include "core/util/clock.h"
#include "core/util/log.h"
#include "nodeagent/agent.h"
#include "nodeagent/page_chores.h"
#include "nodeagent/peer_process.h"
#include "nodeagent/status_report.h"

namespace egpu::agent {
namespace {

using protocol::Reply;
using protocol::ReplyStatus;

Reply error_reply(ReplyStatus status, std::string message) {
  Reply r;
  r.status = status;
  r.text = std::move(message);
  return r;
}

}  // namespace

LogBudget::Verdict Agent::log_budget(uid_t uid, LogBudgets& budgets) {
  if (uid == 0) return {true, 0};  // an admin's changes are always worth a line
  // Bounded: a node has few users, and forgetting budgets only refills them.
  if (budgets.size() > 4096) budgets.clear();
  auto [it, added] = budgets.try_emplace(uid, kUserLogBurst, kUserLogPerSecond);
  return it->second.take(monotonic_ns());
}

Outgoing Agent::reply(const Reply& r, uint32_t request_id, std::vector<int> fds) {
  return Outgoing{protocol::encode_reply(r, request_id), std::move(fds)};
}

std::vector<Outgoing> Agent::text_chunks(const std::string& text, uint32_t request_id) {
  const size_t room =
      protocol::kMaxReplySize - sizeof(protocol::Header) - sizeof(protocol::ReplyFixed);
  std::vector<Outgoing> out;
  size_t pos = 0;
  do {
    Reply r;
    r.text = text.substr(pos, room);
    pos += r.text.size();
    r.flags = pos < text.size() ? protocol::kReplyMore : 0;
    out.push_back(reply(r, request_id));
  } while (pos < text.size());
  return out;
}

std::vector<Outgoing> Agent::handle(const PeerCred& peer, std::span<const uint8_t> bytes) {
  auto decoded = protocol::decode_request(bytes);
  if (!decoded) {
    EGPU_LOG_DEBUG("bad request from pid %d uid %u: %s", peer.pid, peer.uid,
                   decoded.error().c_str());
    const bool version = decoded.error().find("protocol version") != std::string::npos;
    return {reply(error_reply(version ? ReplyStatus::kVersionMismatch : ReplyStatus::kBadRequest,
                              decoded.error()),
                  protocol::peek_request_id(bytes))};
  }
  const uint32_t id = decoded->request_id;
  return std::visit(
      [&](const auto& r) -> std::vector<Outgoing> {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, protocol::AttachRequest>) return handle_attach(peer, r, id);
        if constexpr (std::is_same_v<T, protocol::CreateRequest>) return handle_create(peer, r, id);
        if constexpr (std::is_same_v<T, protocol::RemoveRequest>) return handle_remove(peer, r, id);
        if constexpr (std::is_same_v<T, protocol::ResizeRequest>) return handle_resize(peer, r, id);
        if constexpr (std::is_same_v<T, protocol::StatusRequest>) return handle_status(peer, id);
        if constexpr (std::is_same_v<T, protocol::ShowRequest>) return handle_show(peer, r, id);
        if constexpr (std::is_same_v<T, protocol::ObjectiveRequest>) {
          return handle_objective(peer, r, id);
        }
        if constexpr (std::is_same_v<T, protocol::UsageRequest>) return handle_usage(peer, r, id);
      },
      decoded->request);
}

std::vector<Outgoing> Agent::handle_attach(const PeerCred& peer, const protocol::AttachRequest& r,
                                           uint32_t id) {
  const model::Instance* inst = nullptr;
  auto o = registry_->authorize_attach(peer.uid, r.job_id, r.step_id, r.gpu_index, &inst);
  if (!o.ok()) return {reply(error_reply(o.status, o.message), id)};
  // The slot lives as long as the process that connected, never as long as
  // whoever has its pid by now (peer_process.h).
  auto pidfd = peer_pidfd(peer.socket, peer.pid, peer.uid);
  if (!pidfd) {
    return {reply(
        error_reply(pidfd.error_code() == ESRCH ? ReplyStatus::kDenied : ReplyStatus::kInternal,
                    pidfd.error()),
        id)};
  }
  GpuArbiter& arb = *arbiters_[inst->gpu];
  const int slot = arb.attach(inst->id, peer.pid);
  if (slot < 0) {
    // Its shim goes on per FailMode; a refused process that uses the GPU is
    // judged by UnmanagedProcesses= like any unattached one.
    return {reply(error_reply(ReplyStatus::kFull, "instance " + std::to_string(inst->id) + " has " +
                                                      std::to_string(shm::kMaxProcsPerInstance) +
                                                      " processes attached already"),
                  id)};
  }
  Attachment a{peer.pid, inst->id, inst->gpu, static_cast<uint32_t>(slot)};
  if (Status s = tracker_->track(a, std::move(*pidfd)); !s) {
    arb.reclaim(inst->id, a.proc_slot, peer.pid);
    return {reply(error_reply(ReplyStatus::kInternal, s.error()), id)};
  }
  EGPU_LOG_DEBUG("process %d attached to instance %llu slot %d", peer.pid,
                 static_cast<unsigned long long>(inst->id), slot);
  Reply ok;
  ok.instance_id = inst->id;
  ok.gpu_slot = inst->slot;
  ok.proc_slot = static_cast<uint32_t>(slot);
  return {reply(
      ok, id,
      {arb.gpu_page_readonly_fd(), arb.instance_page_fd(inst->id), arb.shim_wake_fd(inst->id)})};
}

std::vector<Outgoing> Agent::handle_create(const PeerCred& peer, const protocol::CreateRequest& r,
                                           uint32_t id) {
  // Refused before the caller's /proc entry and its job's pages are read.
  if (auto o = model::InstanceRegistry::may_create(peer.uid); !o.ok())
    return {reply(error_reply(o.status, o.message), id)};
  model::CreateSpec spec{r.job_id,
                         r.step_id,
                         r.gpu_index,
                         r.uid,
                         r.gid,
                         r.units,
                         r.job_units,
                         *mode_from_value(r.mode),  // the decoder admits only modes
                         r.mem_quota,
                         (r.flags & protocol::kCreateUmbrella) != 0,
                         (r.flags & protocol::kCreateEndsWithCaller) != 0
                             ? StepReaper::creator_of(peer.pid)
                             : model::Creator{},
                         0};
  spec.spans_nodes = (r.flags & protocol::kCreateSpansNodes) != 0;
  if (r.gpu_index < arbiters_.size() && (r.flags & protocol::kCreateUmbrella) == 0) {
    spec.umbrella_mem_used = umbrella_memory_used(r.job_id, r.gpu_index);
  }
  // Each of a user's chores waiting its turn holds a descriptor of a page
  // (PageChores): a user whose jobs hold their pages' locks would otherwise
  // make every step it ends cost the agent one, for good.
  if (const size_t backlog = PageChores::backlog(r.uid);
      peer.uid == 0 && backlog >= PageChores::kMaxBacklogPerUser) {
    return {reply(error_reply(ReplyStatus::kFull,
                              "uid " + std::to_string(r.uid) + " has " + std::to_string(backlog) +
                                  " page chores waiting (its jobs hold their pages' locks): no "
                                  "new step of its own until they finish"),
                  id)};
  }
  const model::Instance* inst = nullptr;
  auto o = registry_->create(peer.uid, spec, &inst);
  if (!o.ok()) return {reply(error_reply(o.status, o.message), id)};
  const model::Instance created = *inst;
  GpuArbiter& arb = *arbiters_[created.gpu];
  // The others shrink first (an umbrella gives its steps their units), then
  // the new instance joins with its own share.
  const auto all = targets(created.gpu);
  Status s = arb.retarget(all);
  if (s) {
    s = arb.add(created, all.at(created.id).first, registry_->memory_limit(created),
                /*reopen=*/false);
    // No room for its page: a job may have grown its own into RuntimeDir's
    // room since the last second's look. Taking it back starts now (off this
    // thread: see PageChores); the caller is told to try again.
    if (!s && (s.error_code() == ENOSPC || s.error_code() == EDQUOT) &&
        trim_grown_pages(monotonic_ns(), /*now_or_never=*/true) > 0) {
      s = Error{s.error() +
                " (a job grew its page into RuntimeDir's room; it is being taken "
                "back: try again)"};
    }
  }
  ReplyStatus failure = ReplyStatus::kInternal;
  if (s) {
    write_records(created.gpu);   // siblings may have learnt a larger allocation or grant
    publish_memory(created.gpu);  // the umbrella's limit shrinks by the step's quota
    if (!created.umbrella && !settle_job_memory(created.gpu, created.id, peer.uid)) {
      failure = ReplyStatus::kOverAllocation;
      s = Error{"--egpu-mem: the batch or interactive step of job " +
                std::to_string(created.job_id) + " allocated GPU " + std::to_string(created.gpu) +
                " memory while this step started; the job's memory no longer fits its quota"};
    }
    if (s) s = watch_kicks(created.gpu, created.id);
    if (!s) arb.remove(created.id);
  }
  if (!s) {
    // Only this GPU's instance: the step's others (a gang's ranks created
    // before it) are alive in their arbiters.
    registry_->erase(created.id);
    (void)retarget(created.gpu);
    return {reply(error_reply(failure, s.error()), id)};
  }
  const model::Instance settled = *registry_->find(created.id);
  reaper_->watch(created.id, created.creator);
  sync_user_sockets_soon();  // its user's own socket, if it is the first
  apply_gangs();             // a step's second GPU makes it a gang
  tick(created.gpu);
  EGPU_LOG_INFO(
      "created instance %llu: job %llu step %u on GPU %u, %u units (job %u), %s, quota %llu MiB",
      static_cast<unsigned long long>(created.id), static_cast<unsigned long long>(created.job_id),
      created.step_id, created.gpu, created.units, created.job_units, to_string(created.mode),
      static_cast<unsigned long long>(settled.mem_quota >> 20));
  Reply ok;
  ok.instance_id = created.id;
  ok.gpu_slot = created.slot;
  return {reply(ok, id)};
}

std::vector<Outgoing> Agent::handle_remove(const PeerCred& peer, const protocol::RemoveRequest& r,
                                           uint32_t id) {
  std::vector<model::Instance> removed;
  auto o = registry_->remove(peer.uid, r.job_id, r.step_id, &removed);
  if (!o.ok()) return {reply(error_reply(o.status, o.message), id)};
  const std::vector<accounting::StepUsage> usage = drop(removed);
  // What each instance achieved: SPANK records it in the job's AdminComment.
  Reply ok;
  ok.text = accounting::removal_to_json(removed.size(), usage);
  return {reply(ok, id)};
}

std::vector<Outgoing> Agent::handle_usage(const PeerCred& peer, const protocol::UsageRequest& r,
                                          uint32_t id) {
  std::vector<accounting::StepUsage> usage;
  const std::string step =
      r.step_id == protocol::kAllSteps
          ? "job " + std::to_string(r.job_id)
          : "step " + std::to_string(r.job_id) + "." + protocol::step_label(r.step_id);
  for (const model::Instance* inst : registry_->all()) {
    if (inst->job_id != r.job_id ||
        (r.step_id != protocol::kAllSteps && inst->step_id != r.step_id))
      continue;
    if (!registry_->may_see_details(peer.uid, *inst))
      return {reply(error_reply(ReplyStatus::kDenied, step + " belongs to another user"), id)};
    if (auto u = arbiters_[inst->gpu]->usage_so_far(inst->id)) usage.push_back(*u);
  }
  if (usage.empty())
    return {reply(error_reply(ReplyStatus::kNotFound, step + " has no instances here"), id)};
  Reply ok;
  ok.text = accounting::usage_to_json(usage);
  return {reply(ok, id)};
}

std::vector<accounting::StepUsage> Agent::drop(const std::vector<model::Instance>& removed) {
  sync_user_sockets_soon();  // a user's last instance closes its socket
  std::vector<accounting::StepUsage> usage;
  for (const auto& inst : removed) {
    tracker_->forget_instance(inst.id);
    reaper_->forget(inst.id);
    unwatch_kicks(inst.gpu, inst.id);
    const auto u = arbiters_[inst.gpu]->finish(inst.id);
    arbiters_[inst.gpu]->remove(inst.id);
    if (!u) {
      EGPU_LOG_INFO("removed instance %llu (job %llu step %u, GPU %u)",
                    static_cast<unsigned long long>(inst.id),
                    static_cast<unsigned long long>(inst.job_id), inst.step_id, inst.gpu);
      continue;
    }
    usage.push_back(*u);
    usage.back().step = protocol::step_label(inst.step_id);
    EGPU_LOG_INFO(
        "removed instance %llu (job %llu step %u, GPU %u): %u units, device %.3f s in %.3f s "
        "(share %.3f), throttled %.3f s, memory peak %llu bytes, agent restarts %u%s",
        static_cast<unsigned long long>(inst.id), static_cast<unsigned long long>(inst.job_id),
        inst.step_id, inst.gpu, u->units, u->device_s(), u->elapsed_s(), u->achieved_share(),
        u->throttled_s(), static_cast<unsigned long long>(u->totals.mem_peak_bytes),
        u->totals.agent_restarts, u->totals.partial != 0 ? " (partial)" : "");
  }
  for (const auto& inst : removed) {
    (void)retarget(inst.gpu);
    tick(inst.gpu);
  }
  return usage;
}

void Agent::on_step_gone(uint64_t instance_id) {
  const model::Instance* inst = registry_->find(instance_id);
  if (inst == nullptr) return;
  EGPU_LOG_WARN(
      "instance %llu (job %llu step %u): the process that asked for it (pid %d, the step's "
      "slurmstepd) ended without removing it; freeing the step's instances",
      static_cast<unsigned long long>(instance_id), static_cast<unsigned long long>(inst->job_id),
      inst->step_id, inst->creator.pid);
  std::vector<model::Instance> removed;
  if (registry_->remove(0, inst->job_id, inst->step_id, &removed).ok()) (void)drop(removed);
}

void Agent::write_records(uint32_t gpu) {
  // What the registry knows, in the GPU page: it outlives a restart.
  for (const model::Instance* inst : registry_->on_gpu(gpu))
    arbiters_[gpu]->update_control(*inst);
}

std::vector<Outgoing> Agent::handle_resize(const PeerCred& peer, const protocol::ResizeRequest& r,
                                           uint32_t id) {
  // Refused before the job's umbrella page is read.
  const bool force = (r.flags & protocol::kResizeForce) != 0;
  if (auto o = registry_->may_change(peer.uid, r.instance_id, force); !o.ok())
    return {reply(error_reply(o.status, o.message), id)};
  model::Instance updated;
  uint64_t umbrella_used = 0;
  if (const model::Instance* before = registry_->find(r.instance_id);
      before != nullptr && !before->umbrella) {
    umbrella_used = umbrella_memory_used(before->job_id, before->gpu);
  }
  // The decoder admits only modes and kModeUnchanged (nullopt here).
  auto o = registry_->resize(peer.uid, r.instance_id, r.units, mode_from_value(r.mode), &updated,
                             umbrella_used, force);
  if (!o.ok()) return {reply(error_reply(o.status, o.message), id)};
  GpuArbiter& arb = *arbiters_[updated.gpu];
  write_records(updated.gpu);  // the job's other instances may have a new allocation too
  if (Status s = retarget(updated.gpu); !s) {
    return {reply(error_reply(ReplyStatus::kInternal, s.error()), id)};
  }
  if (!updated.umbrella && settle_job_memory(updated.gpu, updated.id, peer.uid)) {
    updated = *registry_->find(updated.id);
    arb.update_control(updated);
  }
  tick(updated.gpu);
  if (const auto budget = log_budget(peer.uid); budget.log) {
    EGPU_LOG_INFO("resized instance %llu to %u units, %s (by uid %u%s)",
                  static_cast<unsigned long long>(updated.id), updated.units,
                  to_string(updated.mode), peer.uid, dropped_note(budget).c_str());
  }
  if (force && updated.job_units > updated.granted_units && updated.granted_units != 0) {
    EGPU_LOG_WARN("job %llu holds %u units on GPU %u, past the %u Slurm granted (forced by uid %u)",
                  static_cast<unsigned long long>(updated.job_id), updated.job_units, updated.gpu,
                  updated.granted_units, peer.uid);
  }
  Reply ok;
  ok.instance_id = updated.id;
  ok.text = instance_json(*this, updated.id, peer.uid);
  return {reply(ok, id)};
}

std::vector<Outgoing> Agent::handle_objective(const PeerCred& peer,
                                              const protocol::ObjectiveRequest& r, uint32_t id) {
  std::optional<slo::LatencyObjective> objective;
  if (r.percentile_milli != 0) objective = slo::LatencyObjective{r.percentile_milli, r.target_ns};
  model::Instance updated;
  auto o = registry_->set_objective(peer.uid, r.instance_id, objective, &updated);
  if (!o.ok()) return {reply(error_reply(o.status, o.message), id)};
  // Kept in the GPU page; the latency control's next period (at most
  // LatencyControl::kPeriodNs away) starts borrowing, or gives back.
  arbiters_[updated.gpu]->update_control(updated);
  schedule_latency_control();
  if (const auto budget = log_budget(peer.uid); budget.log) {
    EGPU_LOG_INFO("instance %llu: latency objective %s (by uid %u%s)",
                  static_cast<unsigned long long>(updated.id), slo::to_string(objective).c_str(),
                  peer.uid, dropped_note(budget).c_str());
  }
  Reply ok;
  ok.instance_id = updated.id;
  ok.text = instance_json(*this, updated.id, peer.uid);
  return {reply(ok, id)};
}

std::vector<Outgoing> Agent::handle_status(const PeerCred& peer, uint32_t id) {
  return text_chunks(status_json(*this, peer.uid), id);
}

std::vector<Outgoing> Agent::handle_show(const PeerCred& peer, const protocol::ShowRequest& r,
                                         uint32_t id) {
  const model::Instance* inst = registry_->find(r.instance_id);
  if (inst == nullptr) {
    return {reply(
        error_reply(ReplyStatus::kNotFound, "no instance " + std::to_string(r.instance_id)), id)};
  }
  if (!registry_->may_see_details(peer.uid, *inst)) {
    return {reply(error_reply(ReplyStatus::kDenied, "instance " + std::to_string(r.instance_id) +
                                                        " belongs to another user"),
                  id)};
  }
  return text_chunks(instance_json(*this, r.instance_id, peer.uid), id);
}

}  // namespace egpu::agent
