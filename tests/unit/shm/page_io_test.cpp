// The instance page's API (proc_slot_io.h, latency_counts.h): what a shim
// writes is what the agent reads, and whatever a hostile job writes into its
// page instead, the agent reads within the bounds pages.h states.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <memory>

#include "core/shm/gpu_page_io.h"
#include "core/shm/latency_counts.h"
#include "core/shm/pages.h"
#include "core/shm/proc_slot_io.h"
#include "core/shm/slot_control_io.h"

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

TEST(PageIo, WhatTheAgentPublishesOnTheGpuPageTheShimsRead) {
  auto gpu = std::make_unique<GpuPage>();
  gpu->holder = kNoHolder;
  gpu->heartbeat_timeout_ns = 1'000;
  const GpuPageWriter agent(gpu.get());
  agent.beat(10'000);
  EXPECT_TRUE(agent_alive(*gpu, 11'000));
  EXPECT_FALSE(agent_alive(*gpu, 11'001));
  EXPECT_EQ(heartbeat_stale_at(*gpu), 11'000);

  const uint32_t seq = gpu->grant_seq.load();
  agent.grant(4);
  EXPECT_EQ(slice_holder(*gpu), 4u);
  EXPECT_EQ(agent.holder(), 4u);
  EXPECT_EQ(gpu->grant_seq.load(), seq + 1);  // the futex word's sleepers look again
  agent.grant(kNoHolder);                     // a tail drains
  EXPECT_EQ(slice_holder(*gpu), kNoHolder);

  EXPECT_FALSE(someone_waits(*gpu));
  EXPECT_TRUE(agent.set_waiters(2));
  EXPECT_FALSE(agent.set_waiters(2));
  EXPECT_TRUE(someone_waits(*gpu));
  EXPECT_TRUE(agent.set_inflight_bound(3'000'000));
  EXPECT_FALSE(agent.set_inflight_bound(3'000'000));
  EXPECT_EQ(inflight_bound(*gpu), 3'000'000);

  agent.stop();  // stale at once, whatever the timeout
  EXPECT_FALSE(agent_alive(*gpu, 1'001));
  EXPECT_EQ(gpu->grant_seq.load(), seq + 3);
  gpu->heartbeat_timeout_ns = 0;  // never declared dead
  EXPECT_FALSE(heartbeat_stale_at(*gpu).has_value());
  EXPECT_TRUE(agent_alive(*gpu, INT64_MAX));
}

TEST(PageIo, AnInstanceRecordReadsBackAsItWasWrittenAndDamageIsNamed) {
  auto gpu = std::make_unique<GpuPage>();
  auto records = std::make_unique<GpuRecordPage>();
  model::Instance inst;
  inst.id = 77;
  inst.job_id = 1234;
  inst.step_id = 2;
  inst.gpu = 1;
  inst.slot = 5;
  inst.uid = 1001;
  inst.gid = 1002;
  inst.units = 30;
  inst.job_units = 60;
  inst.mode = Mode::kLend;
  inst.mem_quota = 1ull << 30;
  inst.umbrella = true;
  inst.mem_quota_explicit = true;
  inst.creator = {4321, 99};
  inst.objective = slo::LatencyObjective{99'000, 40'000'000};
  SlotRecord& c = records->records[inst.slot];
  SlotGrant& g = gpu->slots[inst.slot];
  write_slot_control(c, g, inst);
  set_mem_limit(g, 1ull << 29);
  EXPECT_EQ(slot_instance(g), 77u);
  EXPECT_EQ(slot_units(g), 30u);
  EXPECT_EQ(slot_mem_limit(g), 1ull << 29);

  auto back = read_slot_control(c, inst.gpu, inst.slot);
  ASSERT_TRUE(back.ok()) << back.error();
  ASSERT_TRUE(back->has_value());
  const model::Instance& r = (*back)->instance;
  EXPECT_TRUE((*back)->warning.empty());
  EXPECT_EQ(r.id, inst.id);
  EXPECT_EQ(r.job_id, inst.job_id);
  EXPECT_EQ(r.step_id, inst.step_id);
  EXPECT_EQ(r.units, inst.units);
  EXPECT_EQ(r.job_units, inst.job_units);
  EXPECT_EQ(r.mode, Mode::kLend);
  EXPECT_EQ(r.uid, inst.uid);
  EXPECT_EQ(r.gid, inst.gid);
  EXPECT_EQ(r.mem_quota, inst.mem_quota);
  EXPECT_TRUE(r.umbrella);
  EXPECT_TRUE(r.mem_quota_explicit);
  EXPECT_EQ(r.creator.pid, 4321);
  EXPECT_EQ(r.creator.start, 99u);
  ASSERT_TRUE(r.objective.has_value());
  EXPECT_EQ(r.objective->target_ns, 40'000'000);

  c.slo_target_ns = 1;  // below any objective's target: dropped, said
  back = read_slot_control(c, inst.gpu, inst.slot);
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_FALSE((*back)->instance.objective.has_value());
  EXPECT_NE((*back)->warning.find("latency objective"), std::string::npos);

  c.mode = 9;  // no mode has that number: not recovered
  back = read_slot_control(c, inst.gpu, inst.slot);
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.error().find("mode 9"), std::string::npos) << back.error();

  free_slot_control(c, g);
  EXPECT_EQ(slot_instance(g), 0u);
  back = read_slot_control(c, inst.gpu, inst.slot);
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->has_value());
}

}  // namespace
}  // namespace egpu::shm
