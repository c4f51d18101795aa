#include "egpu_env_list.h"

#include <string.h>

size_t egpu_env_remove_all(char** env, const char* name, void (*release)(char* entry)) {
  if (!env || !name) return 0;
  const size_t len = strlen(name);
  size_t removed = 0;
  char** out = env;
  char** in = env;
  for (; *in; in++) {
    if (strncmp(*in, name, len) == 0 && (*in)[len] == '=') {
      if (release) release(*in);
      removed++;
    } else {
      *out++ = *in;
    }
  }
  /* Every slot freed is NULL, up to the old terminator: Slurm appends after
   * the last non-NULL slot of the array's allocation (_extend_env), which a
   * stale pointer left here would put past the terminator. */
  while (out <= in)
    *out++ = NULL;
  return removed;
}
