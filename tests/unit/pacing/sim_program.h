// SimProgram: a program launching on a SimDevice through a DevicePacer the way
// the shim does: wait (in simulated time) while the in-flight bound is reached,
// then before_launch / launch / after_launch under the stream lock.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

#include "core/pacing/device_pacer.h"
#include "sim_device.h"

namespace egpu::pacing::testing {

inline constexpr int64_t kUs = 1'000;
inline constexpr int64_t kMs = 1'000'000;

class SimProgram {
 public:
  SimProgram(SimDevice& device, DevicePacer& pacer, int64_t cpu_per_launch_ns = 1 * kUs)
      : device_(device), pacer_(pacer), cpu_per_launch_ns_(cpu_per_launch_ns) {
    device_.set_now(now_);
  }

  void launch(StreamHandle stream, int64_t duration_ns) {
    int guard = 0;
    while (!pacer_.under_limit()) {
      advance(100 * kUs);
      blocked_ns_ += 100 * kUs;
      charged_ += pacer_.poll_all(now_, kThread);
      ASSERT_LT(++guard, 1'000'000) << "the in-flight bound never released";
    }
    auto s = pacer_.stream(stream, stream, 0);
    ASSERT_NE(s, nullptr);
    {
      std::lock_guard lock(s->lock());
      charged_ += s->before_launch(now_);
      device_.launch(stream, duration_ns);
      charged_ += s->after_launch(now_);
    }
    max_true_queued_ = std::max(max_true_queued_, device_.queued_now());
    ++launches_;
    advance(cpu_per_launch_ns_);
  }

  // A synchronising call on `stream`: the shim closes the tails, the call
  // returns when the stream is done, the shim polls.
  void synchronize(StreamHandle stream) {
    charged_ += pacer_.close_tails(now_, kThread);
    const int64_t done = device_.drained_at();
    (void)stream;
    if (done > now_) advance(done - now_);
    charged_ += pacer_.poll_all(now_, kThread);
  }

  void idle(int64_t ns) { advance(ns); }

  // Lets everything finish and collects the last charges.
  void finish() {
    const int64_t done = device_.drained_at();
    if (done > now_) advance(done - now_);
    advance(1 * kMs);
    charged_ += pacer_.poll_all(now_, kThread);
    charged_ += pacer_.poll_all(now_, kThread);
  }

  void advance(int64_t ns) {
    now_ += ns;
    device_.set_now(now_);
  }

  int64_t now() const { return now_; }
  const Charge& charged() const { return charged_; }
  int64_t blocked_ns() const { return blocked_ns_; }
  int64_t max_true_queued() const { return max_true_queued_; }
  int64_t launches() const { return launches_; }

  static constexpr uint64_t kThread = 1;

 private:
  SimDevice& device_;
  DevicePacer& pacer_;
  int64_t cpu_per_launch_ns_;
  int64_t now_ = 1'000'000'000;
  Charge charged_;
  int64_t blocked_ns_ = 0;
  int64_t max_true_queued_ = 0;
  int64_t launches_ = 0;
};

// |a - b| <= fraction of b.
inline ::testing::AssertionResult WithinFraction(int64_t a, int64_t b, double fraction) {
  const double diff = std::abs(static_cast<double>(a - b));
  if (diff <= fraction * static_cast<double>(b)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << a << " vs " << b << ": off by " << diff / static_cast<double>(b) * 100 << "%";
}

}  // namespace egpu::pacing::testing
