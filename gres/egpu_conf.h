/* The few egpu.conf keys the Slurm plugins read. egpu.conf is the node
 * agent's config file (Slurm-style Key=Value lines, '#' comments); the plugin
 * only needs TopologyXml= (an hwloc XML that replaces live discovery, used on
 * test nodes). Plain C, no Slurm headers, so it is unit-testable. */
#ifndef EGPU_GRES_EGPU_CONF_H
#define EGPU_GRES_EGPU_CONF_H

#include <stddef.h>

#include "core/env/egpu_env_names.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Path of the egpu.conf to read: $EGPU_CONF when set and non-empty, else the
 * default. */
const char* egpu_conf_path(void);

/* Finds the value of `key` (case-insensitive) in the config text. Lines are
 * "Key=Value" with optional blanks around '=', '#' starts a comment, values
 * may be double-quoted. The last occurrence wins. Copies the value into out
 * (NUL-terminated) and returns 1; returns 0 when the key is absent and -1 when
 * the value does not fit. */
int egpu_conf_find(const char* text, const char* key, char* out, size_t outlen);

/* Reads the file at path and looks up key as above. Returns 1 found, 0 absent
 * or no file, -1 on read error or overflow. */
int egpu_conf_file_find(const char* path, const char* key, char* out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif
