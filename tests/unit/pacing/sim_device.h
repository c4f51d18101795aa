// SimDevice: a deterministic simulated GPU behind pacing::EventBackend. The test
// moves host time by hand; kernels of declared duration run on streams either
// one at a time in submission order (like a context's single queue on simgpu)
// or each stream on its own engine (concurrent streams). Events complete when
// the work before them has; elapsed times are exact device times. It also keeps
// the truth the pacing is compared with: the device time the process used.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "core/pacing/event_backend.h"

namespace egpu::pacing::testing {

class SimDevice : public EventBackend {
 public:
  enum class Engines { kSerial, kPerStream };
  explicit SimDevice(Engines engines = Engines::kSerial) : engines_(engines) {}

  void set_now(int64_t now) {
    std::lock_guard lock(mu_);
    now_ = now;
  }
  int64_t now() const {
    std::lock_guard lock(mu_);
    return now_;
  }
  // Queues a kernel of `duration_ns` on `stream` at the current host time.
  void launch(StreamHandle stream, int64_t duration_ns);
  // Device time of the process's work that has run by now (union of kernels).
  int64_t busy_until_now() const;
  // Device time queued on `stream` (or on any stream) and not yet run at now.
  int64_t queued_now(StreamHandle stream) const;
  int64_t queued_now() const;
  // Time when everything queued so far is finished.
  int64_t drained_at() const;

  // Fault injection: every query fails from now on.
  void fail_queries(bool fail) {
    std::lock_guard lock(mu_);
    fail_queries_ = fail;
  }

  int records() const { return records_; }
  int queries() const { return queries_; }
  int events_created() const { return created_; }
  int events_live() const { return created_ - destroyed_; }

  bool create_event(EventHandle* event) override;
  void destroy_event(EventHandle event) override;
  bool record(EventHandle event, StreamHandle stream) override;
  EventState query(EventHandle event) override;
  bool elapsed_ns(EventHandle start, EventHandle end, int64_t* ns) override;

 private:
  struct Event {
    bool live = true;
    bool recorded = false;
    int64_t completes_at = 0;
  };
  struct Kernel {
    int64_t start;
    int64_t end;
    StreamHandle stream;
  };
  int64_t& engine_free(StreamHandle stream);

  const Engines engines_;
  mutable std::mutex mu_;
  int64_t now_ = 0;
  int64_t serial_free_ = 0;
  std::map<StreamHandle, int64_t> stream_free_;  // end of the stream's last work
  std::map<StreamHandle, int64_t> engine_free_;  // kPerStream engines
  std::vector<Kernel> kernels_;
  std::vector<Event> events_;
  bool fail_queries_ = false;
  int records_ = 0;
  int queries_ = 0;
  int created_ = 0;
  int destroyed_ = 0;
};

}  // namespace egpu::pacing::testing
