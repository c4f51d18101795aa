// Attachment: this process's coordinates on one GPU after a successful attach:
// the GPU page (read-only), the instance page (read-write), its slots and the
// instance's wake channel to the agent. Immutable once published and never unmapped: after a
// re-attach, threads still holding the old one read a stale but valid page.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "core/protocol/attach_exchange.h"
#include "core/shm/gpu_page_io.h"
#include "core/shm/page_file.h"
#include "core/shm/pages.h"
#include "core/shm/proc_slot_io.h"
#include "core/util/fail_mode.h"
#include "core/util/result.h"
#include "core/util/unique_fd.h"

namespace egpu::shim {

struct Attachment {
  shm::Mapping gpu_mapping;
  shm::Mapping instance_mapping;
  UniqueFd wake;
  const shm::GpuPage* gpu = nullptr;
  shm::InstancePage* instance = nullptr;
  shm::ProcSlotWriter me;  // this process's slot in `instance`
  uint32_t gpu_slot = 0;
  uint32_t proc_slot = 0;
  uint64_t instance_id = 0;
  uint64_t epoch = 0;
  // EGPU_FAIL_MODE, when set, wins over the page's value.
  std::optional<FailMode> fail_mode_override;

  const shm::SlotGrant& control() const { return gpu->slots[gpu_slot]; }
  // The agent removed the instance: its GPU slot is free or someone else's.
  bool instance_gone() const { return shm::slot_instance(control()) != instance_id; }
  FailMode fail_mode() const {
    if (fail_mode_override) return *fail_mode_override;
    return shm::page_fail_mode(*gpu);
  }
};

// Maps and validates what the agent sent for physical GPU `gpu_index`.
Result<std::unique_ptr<Attachment>> make_attachment(protocol::AttachReply reply,
                                                    uint32_t gpu_index);

// Asks the agent to decide now (one datagram on the wake channel). Never
// blocks and never raises SIGPIPE, whatever was done to the descriptor's
// flags and whether or not the agent that sent it still runs.
void kick_agent(const Attachment& a);

}  // namespace egpu::shim
