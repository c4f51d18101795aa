/* job_submit/egpu's packed node weights (PackNodes=yes in egpu.conf): a
 * thread in slurmctld that keeps node weights following free egpu units. */
#ifndef EGPU_GRES_EGPU_NODE_WEIGHTS_H
#define EGPU_GRES_EGPU_NODE_WEIGHTS_H

#include "egpu_slurm.h"

/* Starts the thread (slurmctld only; idempotent). It reads the controller's
 * egpu.conf once a second and acts only while PackNodes=yes. */
void egpu_node_weights_start(void);

/* Ends it (the plugin's fini). */
void egpu_node_weights_stop(void);

#endif
