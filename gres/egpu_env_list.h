/* Removing a variable from an environment array (NULL-terminated "NAME=value"
 * strings), every occurrence of it. Slurm's unsetenvp() steps past the entry
 * that moves into a removed one's place, so of two copies in a row it leaves
 * one; its getenvp() and spank_getenv() then find it. An environment a job
 * submits through the API (or a patched srun) may name a variable twice.
 * Plain C, unit-testable. */
#ifndef EGPU_GRES_EGPU_ENV_LIST_H
#define EGPU_GRES_EGPU_ENV_LIST_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Removes every "name=..." from env (compacting it; NULL env: nothing),
 * passing each removed string to release (Slurm's xfree for its arrays).
 * The slots freed at the end are NULL, as Slurm's env_array functions
 * expect. Returns how many were removed. */
size_t egpu_env_remove_all(char** env, const char* name, void (*release)(char* entry));

#ifdef __cplusplus
}
#endif

#endif
