// GpuBinding: everything the shim keeps for one managed GPU (one CUDA ordinal
// of this process): the current attachment, the attach/re-attach bookkeeping,
// the pacing of the process's streams and the local duty cycle of fail mode
// "closed". Lives as long as the process.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "core/pacing/device_pacer.h"
#include "core/pacing/local_duty_cycle.h"
#include "shim/attachment.h"
#include "shim/burst_latency.h"
#include "shim/log.h"

namespace egpu::shim {

enum class Link {
  kNeverTried,
  kAttached,
  kUnreachable,  // retried from time to time
  kRefused,      // the agent said no: retried like kUnreachable
  kOrphaned,     // its instance was removed under it (the step ended)
};

class GpuBinding {
 public:
  GpuBinding(int ordinal, uint32_t physical_index, pacing::EventBackend& backend,
             const pacing::PacingParams& params)
      : ordinal_(ordinal), physical_index_(physical_index), pacer_(backend, params) {}
  GpuBinding(const GpuBinding&) = delete;
  GpuBinding& operator=(const GpuBinding&) = delete;

  int ordinal() const { return ordinal_; }
  uint32_t physical_index() const { return physical_index_; }
  pacing::DevicePacer& pacer() { return pacer_; }

  // The attachment launches use now; null while unattached.
  Attachment* attachment() const { return current_.load(std::memory_order_acquire); }
  void publish(Attachment* a) { current_.store(a, std::memory_order_release); }

  Link link() const { return link_.load(std::memory_order_acquire); }
  void set_link(Link l) { link_.store(l, std::memory_order_release); }

  // Time of the next attach attempt while unattached or the agent is gone.
  int64_t next_attempt_ns() const { return next_attempt_ns_.load(std::memory_order_relaxed); }
  void set_next_attempt_ns(int64_t t) { next_attempt_ns_.store(t, std::memory_order_relaxed); }

  // The last attach attempt got no answer from the agent (none there, or
  // none in time), as opposed to a refusal or unusable pages.
  bool unanswered() const { return unanswered_.load(std::memory_order_relaxed); }
  void set_unanswered(bool u) { unanswered_.store(u, std::memory_order_relaxed); }

  // The holder's fast path never looks at the agent; every launch at or after
  // this time takes the slow path once, which does.
  bool check_due(int64_t now) const {
    return now >= next_check_ns_.load(std::memory_order_relaxed);
  }
  void set_next_check_ns(int64_t t) { next_check_ns_.store(t, std::memory_order_relaxed); }

  std::mutex& attach_mutex() { return attach_mu_; }
  std::mutex& duty_mutex() { return duty_mu_; }
  pacing::LocalDutyCycle& duty() { return duty_; }  // under duty_mutex()

  BurstLatency& burst() { return burst_; }
  LatencyReports& reports() { return reports_; }

  OnceFlag said_attach_failure;
  OnceFlag said_agent_gone;

 private:
  const int ordinal_;
  const uint32_t physical_index_;
  pacing::DevicePacer pacer_;
  std::atomic<Attachment*> current_{nullptr};
  std::atomic<Link> link_{Link::kNeverTried};
  std::atomic<int64_t> next_attempt_ns_{0};
  std::atomic<int64_t> next_check_ns_{0};
  std::atomic<bool> unanswered_{false};
  std::mutex attach_mu_;
  std::mutex duty_mu_;
  pacing::LocalDutyCycle duty_;
  BurstLatency burst_;
  LatencyReports reports_;
};

}  // namespace egpu::shim
