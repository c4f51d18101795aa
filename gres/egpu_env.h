/* The environment gres/egpu gives jobs, steps, tasks and prolog/epilog.
 *
 * Variables (comma lists are in the same GPU order; the EGPU_* names are
 * core/env/egpu_env_names.h):
 *   CUDA_VISIBLE_DEVICES, SLURM_JOB_GPUS / SLURM_STEP_GPUS, SLURM_GPUS_ON_NODE
 *                      set the way gres/gpu sets them, only when egpu units
 *                      were allocated; never unset (a whole-GPU job's values
 *                      come from gres/gpu and must survive us).
 *   EGPU_GPU_INDICES   node-local GPU indices (Slurm's IDX, = /dev/nvidiaN order)
 *   EGPU_UNITS         units per GPU (1 unit = 1% of a GPU), e.g. "100,20"
 *   EGPU_JOB_UNITS     the job's units on each of those GPUs (jobs and steps;
 *                      0 where slurmstepd does not know them; not in a task
 *                      bound to some of the GPUs)
 *   EGPU_MEM_QUOTA     memory quota in bytes per GPU = units/100 x GPU memory;
 *                      0 where the GPU's memory is unknown
 *   EGPU_GPU_UUIDS     UUIDs of the step's GPUs (egpu ones, else the gpu ones
 *                      from SLURM_STEP_GPUS/SLURM_JOB_GPUS); absent if unknown
 *   EGPU_NODE          Slurm node name (every job and step)
 * The first five EGPU_* are removed from a step that has no egpu allocation
 * (they are ours; a step inherits its job's env). */
#ifndef EGPU_GRES_EGPU_ENV_H
#define EGPU_GRES_EGPU_ENV_H

#include "egpu_slurm.h"

typedef enum { EGPU_ENV_KIND_JOB, EGPU_ENV_KIND_STEP, EGPU_ENV_KIND_TASK } egpu_env_kind_t;

typedef struct {
  egpu_env_kind_t kind;
  char*** env;
  bitstr_t* gpus;          /* GPUs (gres index) holding our units; may be NULL */
  uint64_t units;          /* units on this node, all GPUs together */
  const uint64_t* per_bit; /* units per GPU index when known, else NULL */
  bitstr_t* usable;        /* task binding (TASK only), may be NULL */
  gres_internal_flags_t flags;
} egpu_env_request_t;

void egpu_env_apply(const egpu_env_request_t* req);

/* Prolog/epilog env on node node_inx of the job. */
void egpu_env_prep(char*** env, egpu_prep_t* prep, int node_inx);

#endif
