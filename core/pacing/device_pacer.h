// DevicePacer: a process's pacing state on one GPU: its streams' marker chains,
// the common timeline, and the sum of their queued device time that the
// in-flight bound compares with the limit. Thread-safe: streams are found under
// a map lock; each stream has its own lock (StreamPacer::lock()).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/pacing/charge.h"
#include "core/pacing/stream_pacer.h"

namespace egpu::pacing {

class DevicePacer {
 public:
  DevicePacer(EventBackend& backend, const PacingParams& params, size_t max_streams = 4096);
  DevicePacer(const DevicePacer&) = delete;
  DevicePacer& operator=(const DevicePacer&) = delete;
  // Never calls the backend (it may run at process exit): see destroy_events().
  ~DevicePacer();

  // The chain for stream `key`, created on first use; null when the table is
  // full (the launch then goes unpaced). `record_stream` and `owner` as in
  // StreamPacer.
  std::shared_ptr<StreamPacer> stream(uint64_t key, StreamHandle record_stream, uint64_t owner);
  // The stream was destroyed.
  Charge retire(uint64_t key);
  // The context was destroyed: forget every event, without backend calls.
  void abandon_all();
  // Changes whenever a stream leaves the table: caches of stream() results
  // must look again.
  uint64_t epoch() const { return epoch_.load(std::memory_order_acquire); }

  int64_t queued_ns() const { return shared_.queued_ns.load(std::memory_order_relaxed); }
  int64_t inflight_limit_ns() const { return shared_.limit_ns.load(std::memory_order_relaxed); }
  void set_inflight_limit_ns(int64_t ns) { shared_.limit_ns.store(ns, std::memory_order_relaxed); }
  // The fast-path test: may another launch be queued?
  bool under_limit() const { return queued_ns() < inflight_limit_ns(); }

  // One non-blocking pass over every stream (the in-flight bound's wait loop
  // closes open tails; a poll after a synchronising call only harvests).
  Charge poll_all(int64_t now, uint64_t thread, bool close_tails = true);
  // Before a device- or event-wide synchronising call.
  Charge close_tails(int64_t now, uint64_t thread);
  // Releases every event (an owner that is done with the device: tests).
  void destroy_events();

  size_t stream_count() const;

 private:
  std::vector<std::shared_ptr<StreamPacer>> snapshot() const;

  PacerShared shared_;
  const size_t max_streams_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, std::shared_ptr<StreamPacer>> streams_;
  std::atomic<uint64_t> epoch_{1};
};

}  // namespace egpu::pacing
