// GangPlan: which instances of a node form gangs, and their windows. A gang
// is one step's instances on two or more GPUs of the node (its ranks), or on
// any number when the step runs on other nodes too and the clocks let nodes
// align (its ranks there hold the same windows); each member's window is the
// smallest share among them, so no co-tenant on any of its GPUs gives up
// time to it, at one offset placed first-fit across the node's gangs
// (faa::place_gangs). Gangs of multi-node steps are placed first, in (job,
// step) order: a node's own gangs, which other nodes do not see, then cannot
// move them, and nodes that host the same multi-node steps place them alike.
// A multi-node gang keeps the offset it was given while it still fits (one
// that no longer does, having grown, is placed first fit again, or not at
// all: sliced on its own), so a
// multi-node step that comes to one of its GPUs later (another job's,
// perhaps placed before it in (job, step) order, or resizing in and out)
// cannot move its windows on that node only and leave its ranks elsewhere
// waiting. Two multi-node steps that share a GPU on one node but not on
// another (X on nodes A and B, Y on B and C) may still be placed apart where
// they arrive together: C puts Y at offset 0, B after X. Aligning those
// needs one cluster-wide placement, not done here. The agent keeps the
// offsets across its restarts (core/model/gang_offsets_codec.h), so a
// restart is not a fresh arrival.
// Pure: the agent adds the epoch (its wall-clock alignment) and hands the
// windows to each GPU's policy.
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
  // The offset of each multi-node gang placed (job, step), and the period
  // they are offsets in: kept by the next plan of the same period. Without
  // clock alignment it holds the previous plan's offsets of the multi-node
  // steps still here, unplaced, for when the clock agrees again.
  std::map<std::pair<uint64_t, uint32_t>, faa::Nanos> across_offsets;
  faa::Nanos period = 0;
  // Gangs whose windows did not fit beside the others (job, step): their
  // members are sliced on their own.
  std::vector<std::pair<uint64_t, uint32_t>> unplaced;
};

// `shares`: each instance's FAA target (fraction of its GPU), by id.
// Umbrellas (a job's allocation outside its steps) never form gangs.
// `align_across_nodes`: the node's clock is good enough for windows to open
// with other nodes' (faa::can_align_across_nodes); without it a multi-node
// step is a gang only of its GPUs here, like a node's own.
// `previous`: the plan before this one (its multi-node gangs keep their
// offsets where they still fit).
GangPlan plan_gangs(const std::vector<const Instance*>& instances,
                    const std::map<uint64_t, double>& shares, faa::Nanos period,
                    bool align_across_nodes, const GangPlan& previous = {});

}  // namespace egpu::model
