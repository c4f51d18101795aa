/* Units per GPU of the current step and of its job, read from slurmstepd's own
 * step record.
 * Slurm hands GRES plugins only the GPU bitmap and the node total; with
 * MULTIPLE_SHARING_GRES_PJ (23.11+) a job's units may be split over several
 * GPUs, and only the step record holds the split. */
#ifndef EGPU_GRES_EGPU_STEPD_H
#define EGPU_GRES_EGPU_STEPD_H

#include "egpu_slurm.h"

/* env_ptr must be the pointer slurmstepd passed to job/step_set_env (it is
 * &step->env). Returns the per-GPU-index counts of the egpu allocation whose
 * bitmap equals bit_alloc, or NULL when there is none (or on 22.05). The array
 * lives as long as the step record. */
const uint64_t* egpu_stepd_units_per_gpu(char*** env_ptr, bool is_job, bitstr_t* bit_alloc);

/* The job's units on this node's GPU of gres index idx, from slurmstepd's
 * record of the job's allocation (env_ptr as above: a step's, never a
 * task's, whose env is elsewhere); 0 when not known. A step
 * on a node without the batch step learns its job's allocation there only
 * from this: Slurm hands step_set_env the step's own GRES. */
uint64_t egpu_stepd_job_units_on(char*** env_ptr, int idx);

#endif
