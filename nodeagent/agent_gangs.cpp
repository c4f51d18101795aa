// Gangs on this node: a step's instances on several GPUs hold their slices
// together (core/model/gang_plan.h plans them, core/faa the windows).
#include <sys/types.h>

#include <algorithm>

#include "core/util/clock.h"
#include "core/util/log.h"
#include "nodeagent/agent.h"
#include "nodeagent/clock_quality.h"
#include "nodeagent/state_file.h"

namespace egpu::agent {
namespace {
// The widest bracket of monotonic reads around the wall-clock read that
// still dates it well enough to tell a stepped clock (50 us) from noise.
constexpr faa::Nanos kEpochReadSlack = 10 * faa::kMicrosecond;
// Past this a well-dated read is a stepped clock, not jitter.
constexpr faa::Nanos kEpochMovedSlack = faa::kDefaultAlignTolerance / 10;
// A file of GangOffsets::kMaxGangs gangs is under 512 KiB.
constexpr std::size_t kGangOffsetsMaxBytes = 1u << 20;

std::string gang_offsets_file(const std::string& runtime_dir) {
  return runtime_dir + "/gang-offsets.json";
}
}  // namespace

void Agent::apply_gangs() {
  if (recovering_) return;
  const faa::Nanos period = static_cast<faa::Nanos>(config_.gang_period_ms) * faa::kMillisecond;
  model::GangPlan plan;
  if (period > 0) {
    // Shares without the latency control's loans: a loan changes a rank's
    // FAA target for a while, not the gang's windows on every GPU.
    std::map<uint64_t, double> shares;
    for (uint32_t gpu = 0; gpu < arbiters_.size(); ++gpu)
      for (const auto& [id, target] : registry_->faa_targets(gpu))
        shares[id] = target.first;
    // A multi-node step's windows open with its other nodes' only as far as
    // the clocks agree; past the tolerance it is a gang of its GPUs here.
    plan = model::plan_gangs(registry_->all(), shares, period, clock_alignment().ok(), gangs_);
    // Windows open at wall-clock multiples of the period: the same instants
    // on every node whose clock is synchronized. A re-plan (a step came or
    // went, a loan changed) keeps the epoch unless the clock was stepped.
    faa::Nanos uncertainty = 0;
    const faa::Nanos read = wall_aligned_epoch(period, &uncertainty);
    gang_epoch_ = faa::keep_or_move_epoch(gang_epoch_, read, uncertainty, kEpochReadSlack, period,
                                          kEpochMovedSlack);
    for (auto& [id, window] : plan.windows)
      window.epoch = gang_epoch_;
  }
  for (const auto& key : plan.unplaced) {
    const bool known =
        std::find(gangs_.unplaced.begin(), gangs_.unplaced.end(), key) != gangs_.unplaced.end();
    if (known) continue;
    // Within its owner's budget: one owner resizing in and out of fit
    // must not use up the lines about everyone else's steps.
    uid_t owner = 0;
    for (const model::Instance* inst : registry_->all()) {
      if (inst->job_id == key.first && inst->step_id == key.second) owner = inst->uid;
    }
    if (const auto v = log_budget(owner); v.log) {
      EGPU_LOG_WARN(
          "job %llu step %u: its GPUs' gang windows do not fit beside the others; "
          "its instances are sliced on their own%s",
          static_cast<unsigned long long>(key.first), key.second, dropped_note(v).c_str());
    }
  }
  for (const auto& arb : arbiters_) {
    std::map<uint64_t, faa::GangWindow> mine;
    for (const model::Instance* inst : registry_->on_gpu(arb->gpu())) {
      const auto w = plan.windows.find(inst->id);
      if (w != plan.windows.end()) mine.emplace(inst->id, w->second);
    }
    arb->set_gang_windows(mine);
  }
  gangs_ = std::move(plan);
  save_gang_offsets();
}

void Agent::restore_gang_offsets() {
  const std::string file = gang_offsets_file(config_.runtime_dir);
  auto text = read_state_file(file, kGangOffsetsMaxBytes);
  if (!text) {
    EGPU_LOG_WARN("%s; multi-node steps' gang windows are placed afresh", text.error().c_str());
    return;
  }
  if (!*text) return;
  auto offsets = model::decode_gang_offsets(**text);
  if (!offsets) {
    set_aside_state_file(file);
    EGPU_LOG_WARN("%s: %s (set aside as .bad); multi-node steps' gang windows are placed afresh",
                  file.c_str(), offsets.error().c_str());
    return;
  }
  // Kept by the first plan where the steps are still here and the period is
  // the same; the others are dropped by it.
  gangs_.across_offsets = offsets->offsets;
  gangs_.period = offsets->period;
  saved_gang_offsets_ = std::move(*offsets);
}

void Agent::save_gang_offsets() {
  const model::GangOffsets now{gangs_.period, gangs_.across_offsets};
  if (now == saved_gang_offsets_) return;
  // On the loop: a re-plan comes with a step's start or end or a stepped
  // clock, and the file is a few hundred bytes in /run.
  const std::string file = gang_offsets_file(config_.runtime_dir);
  const Status s = now.offsets.empty() ? remove_state_file(file)
                                       : write_state_file(file, model::encode_gang_offsets(now));
  if (!s) {
    if (const auto v = log_budget(0); v.log) {
      EGPU_LOG_WARN("%s; a restarted agent would place multi-node steps' gang windows afresh%s",
                    s.error().c_str(), dropped_note(v).c_str());
    }
    return;
  }
  saved_gang_offsets_ = now;
}

faa::ClockQuality Agent::clock() const {
  // A clock the nodes share agrees with theirs whatever its discipline says.
  if (config_.gang_clock == config::GangClock::kShared) return {true, 0};
  return read_clock_quality();
}

Status Agent::clock_alignment() const {
  // Without gangs the watch read the clock once, at start: no verdict to show.
  if (config_.gang_period_ms <= 0) return Error{"gangs are off (GangPeriodMs=0)"};
  if (clock_watch_.aligned()) return {};
  return Error{clock_watch_.reason()};
}

Status Agent::start_clock_watch() {
  clock_watch_.observe(clock(), monotonic_ns());
  if (config_.gang_period_ms <= 0) return {};
  clock_timer_.reset(event_new(base_.get(), -1, EV_PERSIST, &Agent::on_clock_timer, this));
  const timeval every{1, 0};
  if (!clock_timer_ || event_add(clock_timer_.get(), &every) != 0)
    return Error{"cannot add the clock watch to the event loop"};
  return {};
}

// Every second: the discipline's verdict and the wall clock's phase. Either
// change moves the windows of the node's multi-node steps (a lost clock
// makes them gangs of their GPUs here only; a stepped one re-places them on
// the new period boundaries).
void Agent::on_clock_timer(evutil_socket_t, short, void* arg) {
  auto* self = static_cast<Agent*>(arg);
  switch (self->clock_watch_.observe(self->clock(), monotonic_ns())) {
    case faa::ClockWatch::Change::kLost:
      EGPU_LOG_WARN("%s: multi-node steps' windows no longer open with their other nodes'",
                    self->clock_watch_.reason().c_str());
      self->apply_gangs();
      return;
    case faa::ClockWatch::Change::kRegained:
      EGPU_LOG_INFO(
          "the clock agrees with the other nodes' again: multi-node steps' windows "
          "open with theirs");
      self->apply_gangs();
      return;
    case faa::ClockWatch::Change::kNone:
      break;
  }
  const faa::Nanos period =
      static_cast<faa::Nanos>(self->config_.gang_period_ms) * faa::kMillisecond;
  // A read interrupted or preempted says nothing of a step: skipped.
  faa::Nanos uncertainty = 0;
  const faa::Nanos read = wall_aligned_epoch(period, &uncertainty);
  const faa::Nanos epoch = faa::keep_or_move_epoch(self->gang_epoch_, read, uncertainty,
                                                   kEpochReadSlack, period, kEpochMovedSlack);
  if (!self->gangs_.windows.empty() && epoch != self->gang_epoch_) {
    EGPU_LOG_INFO("the wall clock was stepped: gang windows placed on its new period boundaries");
    self->gang_epoch_ = epoch;
    self->apply_gangs();
  }
}

}  // namespace egpu::agent
