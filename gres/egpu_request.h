/* Reads egpu requests out of Slurm TRES strings (job_desc tres_per_node etc.:
 * "gres/egpu:30" on 24.11, "gres:egpu:30" on 22.05, optionally with a type
 * "gres/egpu:v100:30", several comma-separated). Plain C, unit-testable. */
#ifndef EGPU_GRES_EGPU_REQUEST_H
#define EGPU_GRES_EGPU_REQUEST_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  EGPU_REQUEST_NONE = 0,     /* no egpu in the string */
  EGPU_REQUEST_FOUND = 1,    /* *units holds the count */
  EGPU_REQUEST_BAD = -1,     /* an egpu entry with an unreadable count */
  EGPU_REQUEST_SEVERAL = -2, /* egpu named more than once; *units: the last */
} egpu_request_status_t;

/* The egpu count in tres (NULL or "" -> NONE). A missing count means 1, as in
 * Slurm; k/m/g suffixes multiply by 1024^n like Slurm's parser. Several egpu
 * entries ("gres/egpu:t4:20,gres/egpu:l40s:80") are SEVERAL: Slurm 22.05 and
 * 24.11 allocate only the last of them and refuse every step of such a job
 * ("Invalid generic resource (gres) specification"). BAD comes first: an
 * unreadable count, and "egpu:30q" or a count past 64 bits, which Slurm
 * would take for a GPU type no node has. */
egpu_request_status_t egpu_request_units(const char* tres, uint64_t* units);

#ifdef __cplusplus
}
#endif
#endif
