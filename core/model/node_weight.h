/* Slurm node weights that pack egpu shares (PackNodes=yes in egpu.conf).
 *
 * Slurm tries the nodes of the lowest weight first. A weight that grows with a
 * node's free egpu units makes new shares fill the nodes with the least left
 * before they open another, which is the best fit Slurm's own CPU-based node
 * choice does not do for GPUs (tools/clustersim, policy `weighted`: 6.5% of
 * the GPUs unallocated at full load on Alibaba's trace against 10.7%).
 *
 * The weight configured in slurm.conf stays the leading key: each configured
 * weight owns a band of EGPU_NODE_WEIGHT_BAND values, so an admin's tiers keep
 * their order and free units only order the nodes within one tier.
 *
 * Plain C: job_submit/egpu (C, inside slurmctld) and the cluster simulator
 * compute it with this one function. */
#ifndef EGPU_CORE_MODEL_NODE_WEIGHT_H
#define EGPU_CORE_MODEL_NODE_WEIGHT_H

/* C header in C pointer style; clang-format is set up for the C++ files. */
/* clang-format off */
#include <stdint.h>

/* Values per configured weight: free units 0..6400 (64 GPUs of 100 units,
 * egpu.conf's largest GpuCount) map to band + 1 .. band + 6401. */
#define EGPU_NODE_WEIGHT_BAND 6401u

/* Slurm's largest usable weight (INFINITE, 0xffffffff, is reserved). */
#define EGPU_NODE_WEIGHT_MAX 0xfffffffeu

/* The largest configured weight that can be packed without leaving
 * Slurm's range; a heavier node keeps its configured weight. */
#define EGPU_NODE_WEIGHT_PACKABLE \
  ((EGPU_NODE_WEIGHT_MAX - EGPU_NODE_WEIGHT_BAND) / EGPU_NODE_WEIGHT_BAND)

/* The weight for a node configured with `configured` that has `free_units`
 * egpu units free (over all its GPUs). */
static inline uint32_t egpu_packed_node_weight(uint32_t configured, uint64_t free_units) {
  if (configured > EGPU_NODE_WEIGHT_PACKABLE) return configured;
  if (free_units > EGPU_NODE_WEIGHT_BAND - 1) free_units = EGPU_NODE_WEIGHT_BAND - 1;
  return configured * EGPU_NODE_WEIGHT_BAND + (uint32_t)free_units + 1u;
}

#endif
