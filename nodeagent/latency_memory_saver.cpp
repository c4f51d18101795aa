#include "nodeagent/latency_memory_saver.h"

#include <exception>
#include <utility>

#include "nodeagent/worker_pool.h"

namespace egpu::agent {
namespace {

WorkerPool& writers() {
  static auto* pool = new WorkerPool(4);  // never destroyed (see WorkerPool)
  return *pool;
}

}  // namespace

void LatencyMemorySaver::submit(uint32_t gpu, std::optional<slo::SloMemory> op) {
  // The task owns its memory (made before anything is counted: out of
  // memory, nothing is left marked as writing).
  auto task = std::make_shared<std::optional<slo::SloMemory>>();
  {
    std::lock_guard lock(mu_);
    Gpu& g = gpus_[gpu];
    if (g.writing) {
      g.next = std::move(op);
      return;
    }
    *task = std::move(op);
    g.writing = true;
    ++writing_;
  }
  // A pool that cannot take it (out of threads) has it written here, as
  // before there was a pool.
  if (!writers().run([this, gpu, task] { drain(gpu, std::move(*task)); })) {
    drain(gpu, std::move(*task));
  }
}

void LatencyMemorySaver::drain(uint32_t gpu, std::optional<slo::SloMemory> op) noexcept {
  for (;;) {
    Status s;
    try {
      s = write_(gpu, op);
    } catch (const std::exception& e) {  // out of memory encoding it
      s = Error{e.what()};
    }
    std::lock_guard lock(mu_);
    if (!s) failure_ = s.error();
    Gpu& g = gpus_[gpu];
    if (!g.next) {
      g.writing = false;
      if (--writing_ == 0) idle_.notify_all();
      return;
    }
    op = std::move(*g.next);
    g.next.reset();
  }
}

void LatencyMemorySaver::wait_idle() {
  std::unique_lock lock(mu_);
  idle_.wait(lock, [this] { return writing_ == 0; });
}

std::optional<std::string> LatencyMemorySaver::take_failure() {
  std::lock_guard lock(mu_);
  return std::exchange(failure_, std::nullopt);
}

}  // namespace egpu::agent
