#include "spank/step_checkpoints.h"

#include <utility>

#include "core/protocol/control_client.h"
#include "spank/step_records.h"

namespace egpu::spank {

std::string checkpoint_step(const CheckpointTarget& target, int timeout_ms) {
  auto client = protocol::ControlClient::connect(target.socket_path);
  if (!client) return "no node agent answers: " + client.error();
  auto r = client->call(protocol::UsageRequest{target.job_id, target.step_id, 0});
  if (!r) return "the node agent failed: " + r.error();
  if (r->status == protocol::ReplyStatus::kNotFound) return "";  // removed: the step is ending
  if (r->status != protocol::ReplyStatus::kOk)
    return "the node agent refused: " + std::string(protocol::to_string(r->status)) + ": " +
           r->text;
  return record_step_usage({target.job_id, target.step_id, target.job_ref, target.node}, r->text,
                           RecordKind::kCheckpoint, timeout_ms, target.env);
}

StepCheckpoints::StepCheckpoints(CheckpointTarget target, std::chrono::milliseconds interval,
                                 int timeout_ms, Log log)
    : target_(std::move(target)),
      interval_(interval),
      timeout_ms_(timeout_ms),
      log_(std::move(log)),
      thread_([this] { run(); }) {}

StepCheckpoints::~StepCheckpoints() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void StepCheckpoints::run() {
  std::unique_lock lock(mu_);
  for (;;) {
    if (wake_.wait_for(lock, interval_, [this] { return stopping_; })) return;
    lock.unlock();
    // Nothing may leave this thread: an exception here would end slurmstepd.
    try {
      const std::string failed = checkpoint_step(target_, timeout_ms_);
      if (!failed.empty()) log_("checkpoint of the step's usage: " + failed);
    } catch (...) {
    }
    lock.lock();
  }
}

}  // namespace egpu::spank
