/* The EGPU_* environment variables: the contract between the parts that set
 * them and the parts that read them. Plain C (no includes, macros only) so the
 * C plugin (gres/) and the C++ parts use the same names; a name that changes
 * here changes for every writer and reader at once.
 *
 * Set by gres/egpu for every job, step and task (values per GPU, comma lists
 * in the order of EGPU_GPU_INDICES; see gres/egpu_env.h). */
#ifndef EGPU_CORE_ENV_EGPU_ENV_NAMES_H
#define EGPU_CORE_ENV_EGPU_ENV_NAMES_H

/* node-local GPU indices (/dev/nvidiaN order), e.g. "0,3"; read by SPANK, the shim */
#define EGPU_ENV_GPU_INDICES "EGPU_GPU_INDICES"
/* units per GPU (1 unit = 1% of a GPU), e.g. "100,20"; read by SPANK */
#define EGPU_ENV_UNITS "EGPU_UNITS"
/* the job's units on each of those GPUs on this node, as Slurm allocated them
 * ("0": not known): a step on a node without the batch step tells the agent
 * its job's allocation there with it; read by SPANK */
#define EGPU_ENV_JOB_UNITS "EGPU_JOB_UNITS"
/* memory quota in bytes per GPU ("0": not known); read by SPANK */
#define EGPU_ENV_MEM_QUOTA "EGPU_MEM_QUOTA"
/* UUIDs of the step's GPUs; for users */
#define EGPU_ENV_GPU_UUIDS "EGPU_GPU_UUIDS"
/* Slurm node name; for users */
#define EGPU_ENV_NODE "EGPU_NODE"

/* Set by spank_egpu in a step's tasks, read by the shim (its being set is
 * what makes a process an egpu one). */
#define EGPU_ENV_JOB_ID "EGPU_JOB_ID"
#define EGPU_ENV_STEP_ID "EGPU_STEP_ID"
/* the agent's control socket; also read by egpuctl */
#define EGPU_ENV_SOCKET "EGPU_SOCKET"
/* "open" or "closed": FailMode= of the node's egpu.conf */
#define EGPU_ENV_FAIL_MODE "EGPU_FAIL_MODE"

/* Set by the admin (slurmd's environment) or the user. */
/* egpu.conf to read instead of EGPU_CONF_DEFAULT_PATH; read by SPANK and gres/egpu */
#define EGPU_ENV_CONF "EGPU_CONF"
#define EGPU_CONF_DEFAULT_PATH "/etc/egpu/egpu.conf"
/* non-empty and not "0": the shim logs what it does on stderr */
#define EGPU_ENV_DEBUG "EGPU_DEBUG"

#endif
