// GangPlan: which instances of a node form gangs, and their windows. A gang
// is one step's instances on two or more GPUs of the node (its ranks); each
// member's window is the smallest share among them, so no co-tenant on any
// of its GPUs gives up time to it, at one offset placed first-fit across
// the node's gangs (faa::place_gangs). Pure: the agent adds the epoch (its
// wall-clock alignment) and hands the windows to each GPU's policy.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/faa/gang_window.h"
#include "core/model/instance_registry.h"

namespace egpu::model {

struct GangPlan {
  // Every gang member's window (epoch 0), by instance id.
  std::map<uint64_t, faa::GangWindow> windows;
  // Gangs whose windows did not fit beside the others (job, step): their
  // members are sliced on their own.
  std::vector<std::pair<uint64_t, uint32_t>> unplaced;
};

// `shares`: each instance's FAA target (fraction of its GPU), by id.
// Umbrellas (a job's allocation outside its steps) never form gangs.
GangPlan plan_gangs(const std::vector<const Instance*>& instances,
                    const std::map<uint64_t, double>& shares, faa::Nanos period);

}  // namespace egpu::model
