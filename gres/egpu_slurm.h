/* Slurm internals used by the egpu plugins, with the thin version glue for the
 * two releases we build against (22.05 and 24.11). Everything else in gres/
 * includes this instead of Slurm headers directly. */
#ifndef EGPU_GRES_EGPU_SLURM_H
#define EGPU_GRES_EGPU_SLURM_H

/* slurm_xlator.h must come right after slurm.h: it renames the API to its
 * exported slurm_* names, declarations included. */
// clang-format off
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>

#include "slurm/slurm.h"
#include "slurm/slurm_errno.h"
#include "src/common/slurm_xlator.h"
#include "src/common/bitstring.h"
#include "src/common/env.h"
#include "src/common/hostlist.h"
#include "src/common/list.h"
#include "src/common/log.h"
#include "src/common/pack.h"
#include "src/common/xmalloc.h"
#include "src/common/xstring.h"
// clang-format on

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 2, 0)
#include "src/interfaces/gres.h"
#define EGPU_SLURM_NEW_GRES_API 1
typedef list_t* egpu_list_t;
typedef list_itr_t* egpu_list_itr_t;
typedef hostlist_t* egpu_hostlist_t;
typedef gres_prep_t egpu_prep_t;
/* A shared GRES's node state -> its sharing GRES's (gpu's), or NULL. */
#define EGPU_ALT_GRES_NS(ns) \
  ((ns)->alt_gres ? (gres_node_state_t*)(ns)->alt_gres->gres_data : NULL)
#else
#include "src/common/gres.h"
#define EGPU_SLURM_NEW_GRES_API 0
typedef List egpu_list_t;
typedef ListIterator egpu_list_itr_t;
typedef hostlist_t egpu_hostlist_t;
typedef gres_epilog_info_t egpu_prep_t;
#define EGPU_ALT_GRES_NS(ns) ((ns)->alt_gres_ns)
#endif

#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(23, 11, 0)
/* Shared units of one job may come from several GPUs (per-bit counts). */
#define EGPU_SLURM_HAS_PER_BIT 1
#else
#define EGPU_SLURM_HAS_PER_BIT 0
#endif

/* Units of egpu capacity per physical GPU (1 unit = 1% of a GPU). */
#define EGPU_UNITS_PER_GPU 100

#endif
