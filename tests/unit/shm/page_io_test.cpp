// The instance page's API (proc_slot_io.h, latency_counts.h): what a shim
// writes is what the agent reads, and whatever a hostile job writes into its
// page instead, the agent reads within the bounds pages.h states.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>

#include "core/shm/latency_counts.h"
#include "core/shm/pages.h"
#include "core/shm/proc_slot_io.h"

namespace egpu::shm {
namespace {

std::unique_ptr<InstancePage> fresh_page() {
  return std::make_unique<InstancePage>();
}

TEST(PageIo, WhatTheShimWritesTheAgentReads) {
  auto page = fresh_page();
  ProcSlot& slot = page->procs[3];
  claim_proc_slot(slot, 4242);
  const ProcSlotWriter me(&slot);
  me.begin_wait();
  me.begin_wait();
  me.end_wait();
  me.add_throttled(700);
  me.add_throttled(-5);  // a clock that stepped back adds nothing
  me.note_launch();
  me.add_device_ns(1'500);
  me.add_device_ns(0);
  me.set_inflight(9'000);
  me.mark_idle(123'456);
  me.count_mem_denied();

  const ProcReading r = read_proc_slot(slot);
  EXPECT_EQ(r.pid, 4242);
  EXPECT_EQ(r.busy, 1u);
  EXPECT_EQ(r.launches, 1u);
  EXPECT_EQ(r.device_ns, 1'500u);
  EXPECT_EQ(r.throttled_ns, 700u);
  EXPECT_EQ(me.throttled_ns(), 700u);
  EXPECT_EQ(r.inflight_ns, 9'000);
  EXPECT_EQ(r.idle_since_ns, 123'456);
  EXPECT_EQ(r.mem_denied, 1u);
  me.set_inflight(-1);
  EXPECT_EQ(read_proc_slot(slot).inflight_ns, 0);

  add_latency_sample(*page, 2'000'000);
  add_burst(*page, 5'000, 2'000);
  const auto counts = read_latency_counts(*page);
  EXPECT_EQ(counts[slo::latency_bucket(2'000'000)], 1u);
  EXPECT_EQ(read_burst_totals(*page).span_ns, 5'000u);
  EXPECT_EQ(read_burst_totals(*page).gate_ns, 2'000u);
}

TEST(PageIo, AClaimedSlotStartsFromZeroAndAReleasedOneReadsFree) {
  auto page = fresh_page();
  ProcSlot& slot = page->procs[0];
  slot.busy = 7;
  slot.launches = 99;
  slot.device_ns = 1'000;
  slot.mem_bytes = 1 << 20;
  slot.throttled_ns = 5;
  slot.inflight_ns = 5;
  slot.mem_denied = 5;
  slot.idle_since_ns = 5;
  claim_proc_slot(slot, 77);
  const ProcReading r = read_proc_slot(slot);
  EXPECT_EQ(r.pid, 77);
  EXPECT_EQ(r.busy + r.launches + r.device_ns + r.throttled_ns + r.mem_denied, 0u);
  EXPECT_EQ(r.inflight_ns + r.idle_since_ns, 0);
  EXPECT_EQ(slot.mem_bytes.load(), 0u);
  ProcSlotWriter(&slot).begin_wait();
  ProcSlotWriter(&slot).add_throttled(40);
  release_proc_slot(slot);
  EXPECT_EQ(read_proc_slot(slot).pid, 0);
  EXPECT_EQ(read_proc_slot(slot).busy, 0u);
  // The instance's totals keep what the process spent waiting.
  EXPECT_EQ(read_proc_slot(slot).throttled_ns, 40u);
}

TEST(PageIo, WhateverAJobWritesTheAgentReadsWithinItsBounds) {
  auto page = fresh_page();
  ProcSlot& slot = page->procs[1];
  slot.pid = -5;
  slot.busy = UINT32_MAX;
  slot.throttled_ns = UINT64_MAX;
  slot.mem_denied = UINT64_MAX;
  slot.inflight_ns = UINT64_MAX;
  slot.idle_since_ns = INT64_MIN;
  const ProcReading r = read_proc_slot(slot);
  EXPECT_EQ(r.pid, 0);
  EXPECT_EQ(r.busy, kMaxBusyThreads);
  EXPECT_EQ(r.throttled_ns, kMaxCumulative);
  EXPECT_EQ(r.mem_denied, kMaxCumulative);
  EXPECT_EQ(r.inflight_ns, static_cast<int64_t>(kMaxInflightNs));
  EXPECT_EQ(r.idle_since_ns, 0);
  // Summed over every slot of a page, the bounded values cannot wrap.
  uint64_t total = 0;
  for (ProcSlot& s : page->procs) {
    s.throttled_ns = UINT64_MAX;
    total += read_proc_slot(s).throttled_ns;
  }
  EXPECT_EQ(total, kMaxCumulative * kMaxProcsPerInstance);

  for (auto& c : page->latency_counts)
    c = UINT64_MAX;
  page->burst_ns = 10;
  page->burst_gate_ns = UINT64_MAX;  // more waiting than the bursts took
  uint64_t samples = 0;
  for (const uint64_t c : read_latency_counts(*page))
    samples += c;
  EXPECT_EQ(samples, kMaxCumulative * slo::kLatencyBuckets);
  EXPECT_EQ(read_burst_totals(*page).gate_ns, 10u);
}

TEST(PageIo, TheShimsReadTheDeviceTimeOfAttachedProcessesOnly) {
  auto page = fresh_page();
  claim_proc_slot(page->procs[0], 10);
  claim_proc_slot(page->procs[5], 11);
  ProcSlotWriter(&page->procs[0]).add_device_ns(100);
  ProcSlotWriter(&page->procs[5]).add_device_ns(20);
  page->procs[9].device_ns = 1'000'000;  // a slot no process holds
  EXPECT_EQ(attached_device_ns(*page), 120u);
}

}  // namespace
}  // namespace egpu::shm
