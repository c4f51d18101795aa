/* Slurm node weights that pack egpu shares (PackNodes=yes in egpu.conf).
 *
 * Slurm tries the nodes of the lowest weight first. A weight that grows with a
 * node's free egpu units makes new shares fill the nodes with the least left
 * before they open another, which is the best fit Slurm's own CPU-based node
 * choice does not do for GPUs (tools/clustersim, policy `weighted`: 6.5% of
 * the GPUs unallocated at full load on Alibaba's trace against 10.7%).
 *
 * The weights configured in slurm.conf stay the leading key: their distinct
 * values, in order, are the tiers 0, 1, 2, ..., and each tier owns a band of
 * EGPU_NODE_WEIGHT_BAND values, so an admin's tiers keep their order and free
 * units only order the nodes within one tier. Ranks, not the configured
 * values, because Slurm orders weights only modulo 2^24: it scores a node set
 * by `uint32_t weight << 8` (node_scheduler.c, _set_sched_weight), which
 * drops the top 8 bits, so every packed weight must stay below 2^24.
 *
 * Plain C: job_submit/egpu (C, inside slurmctld) and the cluster simulator
 * compute it with this one function. */
#ifndef EGPU_CORE_MODEL_NODE_WEIGHT_H
#define EGPU_CORE_MODEL_NODE_WEIGHT_H

/* C header in C pointer style; clang-format is set up for the C++ files. */
/* clang-format off */
#include <stdint.h>

/* Values per tier: free units 0..6400 (64 GPUs of 100 units, egpu.conf's
 * largest GpuCount) map to tier x band + 1 .. tier x band + 6401. */
#define EGPU_NODE_WEIGHT_BAND 6401u

/* Slurm orders weights below 2^24 only (see above). */
#define EGPU_NODE_WEIGHT_LIMIT 0x1000000u

/* Tiers that fit below EGPU_NODE_WEIGHT_LIMIT: 0 .. EGPU_NODE_WEIGHT_TIERS - 1
 * (2621). A cluster with more distinct configured weights is not packed. */
#define EGPU_NODE_WEIGHT_TIERS (EGPU_NODE_WEIGHT_LIMIT / EGPU_NODE_WEIGHT_BAND)

/* The weight for a node of tier `tier` (the rank of its configured weight
 * among the cluster's distinct ones, lightest 0; < EGPU_NODE_WEIGHT_TIERS)
 * that has `free_units` egpu units free over all its GPUs. */
static inline uint32_t egpu_packed_node_weight(uint32_t tier, uint64_t free_units) {
  if (tier >= EGPU_NODE_WEIGHT_TIERS) tier = EGPU_NODE_WEIGHT_TIERS - 1;
  if (free_units > EGPU_NODE_WEIGHT_BAND - 1) free_units = EGPU_NODE_WEIGHT_BAND - 1;
  return tier * EGPU_NODE_WEIGHT_BAND + (uint32_t)free_units + 1u;
}

#endif
